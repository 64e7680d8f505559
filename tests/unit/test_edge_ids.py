"""Root and edge ids (worker/collector.py new_id): a tree completes when its edges XOR to
zero, so an id must never be 0 and two ids of one tree must not repeat. The compiled build
draws them from a xorshift64* on a C integer, the source from the Mersenne Twister: the
same checks hold for both (CI's pure subset runs this file on the source)."""

from squall.worker.collector import new_id


def test_ids_are_non_zero_64_bit_and_do_not_repeat():
    ids = [new_id() for _ in range(200_000)]
    assert all(type(i) is int and 0 < i < 1 << 64 for i in ids)
    assert len(set(ids)) == len(ids)


def test_every_bit_of_an_id_is_set_about_half_the_time():
    ids = [new_id() for _ in range(20_000)]
    for bit in range(64):
        ones = sum(i >> bit & 1 for i in ids)
        assert 9_300 < ones < 10_700, (bit, ones)  # > 9 standard deviations from 10,000


def test_a_tree_of_random_edges_xors_to_zero_only_when_every_edge_is_acked():
    edges = [new_id() for _ in range(1000)]
    val = 0
    for e in edges:  # anchored: each edge XORed in once on emit...
        val ^= e
    for e in edges[:-1]:  # ...and once on ack
        val ^= e
    assert val == edges[-1] != 0
    assert val ^ edges[-1] == 0
