"""nimbus/package_store.py: opaque upload locations, offset checks, the size limit, stormdist."""

import json

import pytest

from squall.client.errors import InvalidRequest, LimitExceeded, PackageTooLarge, TopologyNotFound
from squall.nimbus.package_store import PackageStore


@pytest.fixture
def store(tmp_path):
    return PackageStore({"storm.local.dir": str(tmp_path), "nimbus.package.max.bytes": 100})


def upload(store, data, chunk=7):
    loc = store.begin("wc.zip", len(data))
    for off in range(0, len(data), chunk):
        store.append(loc, off, data[off:off + chunk])
    store.finish(loc)
    return loc


def test_round_trip(store, tmp_path):
    data = bytes(range(90))
    loc = upload(store, data)
    assert "/" not in loc and ".." not in loc
    path = store.commit(loc, "wc-1-17", b"topo", json.dumps({"a": 1}))
    assert path == tmp_path / "nimbus" / "stormdist" / "wc-1-17"
    assert b"".join(c for _, c in store.read_package("wc-1-17", chunk_size=32)) == data
    assert [o for o, _ in store.read_package("wc-1-17", chunk_size=32)] == [0, 32, 64]
    assert store.read_topology("wc-1-17") == b"topo"
    assert store.read_conf("wc-1-17") == {"a": 1}
    assert list((tmp_path / "nimbus" / "inbox").iterdir()) == []
    with pytest.raises(TopologyNotFound):  # a location is used once
        store.commit(loc, "wc-2-17", b"", "{}")
    store.remove("wc-1-17")
    assert not path.exists()
    store.remove("wc-1-17")  # idempotent
    with pytest.raises(TopologyNotFound):
        list(store.read_package("wc-1-17"))


def test_no_package(store):
    store.commit("", "t-1-1", b"x", "{}")
    assert list(store.read_package("t-1-1")) == [] and not store.has_package("t-1-1")


@pytest.mark.parametrize("loc", ["../../etc/passwd", "upload-../x", "a/b", "/tmp/x", ".."])
def test_traversal_refused(store, loc):
    for op in (lambda: store.append(loc, 0, b"x"), lambda: store.finish(loc),
               lambda: store.commit(loc, "t-1-1", b"", "{}"), lambda: store.check_ready(loc)):
        with pytest.raises(InvalidRequest, match="outside Nimbus's inbox"):
            op()
    assert store.topology_ids() == []


def test_unknown_location_refused(store):
    with pytest.raises(TopologyNotFound, match="no upload"):
        store.append("upload-" + "0" * 32, 0, b"x")
    with pytest.raises(TopologyNotFound):
        store.check_ready("package.zip")


def test_bad_topology_id_refused(store):
    with pytest.raises(InvalidRequest):
        store.commit("", "../evil", b"", "{}")
    with pytest.raises(InvalidRequest):
        store.remove("a/b")


def test_offset_mismatch(store):
    loc = store.begin("p", 0)
    store.append(loc, 0, b"abc")
    with pytest.raises(InvalidRequest, match="offset 3"):
        store.append(loc, 0, b"abc")  # a retried chunk is not appended twice
    with pytest.raises(InvalidRequest):
        store.append(loc, 5, b"x")
    assert store.append(loc, 3, b"d") == 4
    with pytest.raises(InvalidRequest, match="not finished"):
        store.check_ready(loc)
    store.finish(loc)
    with pytest.raises(InvalidRequest, match="already finished"):
        store.append(loc, 4, b"e")


def test_size_limit(store):
    with pytest.raises(PackageTooLarge, match="nimbus.package.max.bytes") as info:
        store.begin("big.zip", 101)
    assert info.value.limit == 100
    loc = store.begin("unknown-size.zip", 0)
    store.append(loc, 0, b"x" * 60)
    with pytest.raises(PackageTooLarge, match="at least 120"):
        store.append(loc, 60, b"x" * 60)
    with pytest.raises(TopologyNotFound):  # the oversized upload is discarded
        store.append(loc, 60, b"x")
    assert list(store.inbox.iterdir()) == []


def bounded(tmp_path, **limits):
    conf = {"storm.local.dir": str(tmp_path), "nimbus.package.max.bytes": 100,
            "nimbus.inbox.max.bytes": 150, "nimbus.inbox.max.uploads": 4,
            "nimbus.inbox.max.uploads.per.user": 2, "nimbus.inbox.jar.expiration.secs": 60}
    conf.update(limits)
    return PackageStore(conf)


def test_open_uploads_are_bounded_per_user_and_in_total(tmp_path):
    store = bounded(tmp_path)
    store.begin("a", 0, "alice")
    store.begin("a", 0, "alice")
    with pytest.raises(LimitExceeded, match="alice holds 2 open uploads.*per.user"):
        store.begin("a", 0, "alice")
    store.begin("b", 0, "bob")
    store.begin("c", 0, "carol")
    with pytest.raises(LimitExceeded, match="4 open uploads.*nimbus.inbox.max.uploads"):
        store.begin("d", 0, "dave")


def test_inbox_bytes_are_bounded_over_every_upload(tmp_path):
    store = bounded(tmp_path)
    a = store.begin("a", 0, "alice")
    store.append(a, 0, b"x" * 100)
    b = store.begin("b", 0, "bob")
    with pytest.raises(LimitExceeded, match="holds 100 bytes.*nimbus.inbox.max.bytes"):
        store.append(b, 0, b"y" * 60)
    with pytest.raises(LimitExceeded, match="nimbus.inbox.max.bytes"):
        store.begin("c", 60, "carol")  # announced totals count too
    store.append(b, 0, b"y" * 50)  # what fits still goes in


def test_abandoned_uploads_expire_and_free_their_room(tmp_path):
    import time
    store = bounded(tmp_path)
    old = store.begin("a", 0, "alice")
    store.append(old, 0, b"x" * 100)
    assert store.expire(time.monotonic() + 30) == []
    assert store.expire(time.monotonic() + 61) == [old]
    assert not (tmp_path / "nimbus" / "inbox" / old).exists()
    with pytest.raises(TopologyNotFound):
        store.append(old, 100, b"x")


def test_an_upload_is_usable_only_by_the_principal_who_opened_it(tmp_path):
    from squall.client.errors import PermissionDenied
    store = bounded(tmp_path)
    loc = store.begin("a", 0, "alice")
    with pytest.raises(PermissionDenied, match="mallory may not use upload .* alice opened it"):
        store.append(loc, 0, b"x", "mallory")
    store.append(loc, 0, b"x", "alice")
    with pytest.raises(PermissionDenied):
        store.finish(loc, "mallory")
    store.finish(loc, "alice")
    with pytest.raises(PermissionDenied):
        store.check_ready(loc, "mallory")
    store.check_ready(loc, "alice")
    store.check_ready(loc)  # a plain port knows no principal: nothing to compare
