"""Write ``client/spark_keys.txt``: the configuration keys of the installed pyspark's Spark.

Offline, from the jars the pip package ships (``pyspark/jars/spark-*.jar``): every string
constant of their classes that reads as a ``spark.*`` key. Spark declares its keys as
string constants (``ConfigBuilder("spark.master")``, ``buildConf("spark.sql.shuffle.
partitions")``, the ``SparkLauncher`` constants), so the constant pools hold all of them; a
few strings that are not keys (a local property, a metrics source name) come along and do
no harm: the list only decides which keys are unknown. Keys that Spark builds at run time
(``spark.executor.resource.<name>.amount``, ``spark.hadoop.<hadoop key>``) are covered by
the families written as prefixes (lines ending with ``.``): the prefixes of Spark's own
string templates (``spark.executor.resource.`` from ``"spark.executor.resource.\\u0001"``)
and Spark's documented free-form families (:data:`FAMILIES`).

Run it again after upgrading pyspark::

    .venv/bin/python scripts/spark_keys.py            # rewrites client/spark_keys.txt
    .venv/bin/python scripts/spark_keys.py --check    # exit 1 if the file is out of date
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import struct
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "client", "spark_keys.txt")

#: A key: ``spark.`` then dot-separated words (Spark's keys use letters, digits, ``_`` and
#: ``-``).
KEY = re.compile(r"^spark(\.[A-Za-z0-9_\-]+)+$")
#: A family's prefix: a key-like text ending with a dot (``spark.executorEnv.``).
PREFIX = re.compile(r"^spark(\.[A-Za-z0-9_\-]+)+\.$")

#: Free-form families from Spark's configuration docs (any key below them is Spark's or
#: the library's it is passed to: Hadoop's, an environment variable, a catalog's).
FAMILIES = (
    "spark.hadoop.", "spark.hive.", "spark.executorEnv.", "spark.yarn.appMasterEnv.",
    "spark.kubernetes.driverEnv.", "spark.kubernetes.driver.label.",
    "spark.kubernetes.driver.annotation.", "spark.kubernetes.executor.label.",
    "spark.kubernetes.executor.annotation.", "spark.kubernetes.driver.secrets.",
    "spark.kubernetes.executor.secrets.", "spark.kubernetes.driver.secretKeyRef.",
    "spark.kubernetes.executor.secretKeyRef.", "spark.kubernetes.driver.volumes.",
    "spark.kubernetes.executor.volumes.", "spark.kubernetes.node.selector.",
    "spark.kubernetes.driver.node.selector.", "spark.kubernetes.executor.node.selector.",
    "spark.sql.catalog.", "spark.driver.resource.", "spark.executor.resource.",
    "spark.task.resource.", "spark.worker.resource.", "spark.metrics.conf.",
    "spark.sql.hive.metastore.", "spark.datasource.", "spark.redaction.",
    "spark.ssl.", "spark.authenticate.", "spark.shuffle.push.", "spark.io.compression.",
    "spark.eventLog.", "spark.history.", "spark.ui.filters.", "spark.sql.streaming.",
)
#: Template prefixes too general to be families (they would make whole namespaces known).
TOO_GENERAL = 2  # a prefix needs more than ``spark.<word>.`` to be taken from a template


def constants(data: bytes) -> list[str]:
    """The CONSTANT_String values of one class file (and the string arguments of its
    ``invokedynamic`` concatenation recipes, which are CONSTANT_String too)."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        return []
    count = struct.unpack_from(">H", data, 8)[0]
    utf8: dict[int, bytes] = {}
    strings: list[int] = []
    i, pos = 1, 10
    while i < count:
        tag = data[pos]
        if tag == 1:
            n = struct.unpack_from(">H", data, pos + 1)[0]
            utf8[i] = data[pos + 3:pos + 3 + n]
            pos += 3 + n
        elif tag == 8:
            strings.append(struct.unpack_from(">H", data, pos + 1)[0])
            pos += 3
        elif tag in (3, 4, 9, 10, 11, 12, 17, 18):
            pos += 5
        elif tag in (5, 6):
            pos += 9
            i += 1  # longs and doubles take two slots
        elif tag in (7, 16, 19, 20):
            pos += 3
        elif tag == 15:
            pos += 4
        else:
            raise ValueError(f"unknown constant pool tag {tag}")
        i += 1
    return [utf8[s].decode("utf-8", "replace") for s in strings if s in utf8]


def harvest(jars: list[str]) -> tuple[set[str], set[str]]:
    """(keys, family prefixes) found in ``jars``."""
    keys: set[str] = set()
    prefixes: set[str] = set()
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            for name in z.namelist():
                if not name.endswith(".class"):
                    continue
                for s in constants(z.read(name)):
                    if not s.startswith("spark."):
                        continue
                    if "\x01" in s:  # a concatenation recipe: "spark.x.\u0001.amount"
                        head = s.split("\x01", 1)[0]
                        if PREFIX.match(head) and head.count(".") > TOO_GENERAL:
                            prefixes.add(head)
                    elif KEY.match(s):
                        keys.add(s)
    return keys, prefixes


def render(version: str, keys: set[str], prefixes: set[str]) -> str:
    lines = [f"# Apache Spark {version}'s configuration keys: the string constants of pyspark's",
             "# jars that read as spark.* keys (scripts/spark_keys.py wrote this file; run it",
             "# again after upgrading pyspark). Lines ending with '.' are families: any key",
             "# below them is known. client/config.py warns about a spark.* key close to one",
             "# of these but not one of them (a likely typo: spark.mastr -> spark.master)."]
    return "\n".join(lines + sorted(keys | prefixes | set(FAMILIES))) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true",
                   help="compare with client/spark_keys.txt instead of writing it")
    args = p.parse_args(argv)
    import pyspark

    jars = sorted(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars",
                                         "spark-*.jar")))
    if not jars:
        print("no spark-*.jar in pyspark's jars/", file=sys.stderr)
        return 2
    keys, prefixes = harvest(jars)
    text = render(pyspark.__version__, keys, prefixes)
    if args.check:
        with open(OUT) as fh:
            same = fh.read() == text
        print(f"{OUT}: {'up to date' if same else 'out of date: run scripts/spark_keys.py'}")
        return 0 if same else 1
    with open(OUT, "w") as fh:
        fh.write(text)
    print(f"{OUT}: {len(keys)} keys and {len(prefixes | set(FAMILIES))} families from "
          f"{len(jars)} jars of pyspark {pyspark.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
