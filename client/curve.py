"""The key pair that encrypts and authenticates one topology's worker traffic (CurveZMQ).

Nimbus makes a pair per topology at submit (:func:`topology_keys`) and stores it in the
topology's conf, whose secret values leave Nimbus only for supervisors and other Nimbuses
(``GetTopologyConf`` with ``include_secrets``); a supervisor hands them to the workers it
starts. Every worker of the topology serves with the pair and connects with it, and admits
only peers presenting the topology's public key (:mod:`squall.worker.curve`): knowing the
secret is being a member. Without keys (``storm.messaging.curve: false``) traffic is plain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import zmq

from . import config as cfg


@dataclass(frozen=True)
class CurveKeys:
    public: bytes
    secret: bytes


def topology_keys() -> dict[str, str]:
    """A fresh pair, as the conf entries Nimbus stores with a topology."""
    public, secret = zmq.curve_keypair()
    return {cfg.TOPOLOGY_CURVE_PUBLIC_KEY: public.decode(),
            cfg.TOPOLOGY_CURVE_SECRET_KEY: secret.decode()}


def keys_of(conf: Mapping[str, Any]) -> CurveKeys | None:
    """The topology's pair from its conf, or None when its traffic is plain."""
    public, secret = conf.get(cfg.TOPOLOGY_CURVE_PUBLIC_KEY), conf.get(cfg.TOPOLOGY_CURVE_SECRET_KEY)
    if not public or not secret or not cfg.get(conf, cfg.STORM_MESSAGING_CURVE):
        return None
    return CurveKeys(public.encode(), secret.encode())
