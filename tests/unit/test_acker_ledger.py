"""AckerLedger: acker messages in, spout instructions out (Storm's XOR tuple-tree tracking)."""

import itertools
import random
from functools import reduce
from operator import xor

import pytest

from squall.acker.ledger import AckerLedger, TimeoutReset, TreeAcked, TreeFailed

import event_table
from event_table import calls

ROOT = 0xDEADBEEF_12345678
E1 = 0x8000_0000_0000_0001  # edge ids use all 64 bits
E2 = 0x0F0F_F0F0_1234_5678
X = 0x1111_2222_3333_4444
Y = 0xFFFF_FFFF_FFFF_FFFE
TASK = 7


@pytest.fixture
def ledger():
    led = AckerLedger()
    yield led
    led.validate_state()


def play(ledger, table):
    """Feed each ((op, *args), expected instruction) row to the ledger's methods."""
    event_table.play(calls(ledger), table)


def test_init_then_acks_xoring_to_zero_completes_once(ledger):
    play(ledger, [
        (("init", ROOT, E1 ^ E2, TASK), None),
        (("ack", ROOT, E1), None),
        (("ack", ROOT, E2), TreeAcked(ROOT, TASK)),
    ])
    assert ROOT not in ledger.pending
    assert len(ledger) == 0
    # A duplicate ack of a finished tree does not complete it a second time.
    play(ledger, [(("ack", ROOT, E2), None)])


def test_spout_task_zero_is_a_real_task(ledger):
    play(ledger, [
        (("init", ROOT, E1, 0), None),
        (("ack", ROOT, E1), TreeAcked(ROOT, 0)),
    ])


def test_all_64_bits_of_the_ids_count(ledger):
    low_twin_1, low_twin_2 = 0x0000_0001_CAFE_F00D, 0x0000_0002_CAFE_F00D
    play(ledger, [
        (("init", ROOT, low_twin_1 ^ low_twin_2, TASK), None),  # XOR is 0x3_0000_0000
        (("ack", ROOT, low_twin_1), None),
        (("ack", ROOT, low_twin_2), TreeAcked(ROOT, TASK)),
    ])


def test_acks_before_init_complete_when_init_arrives(ledger):
    play(ledger, [
        (("ack", ROOT, E1), None),
        (("ack", ROOT, E2), None),
        (("init", ROOT, E1 ^ E2, TASK), TreeAcked(ROOT, TASK)),
    ])
    assert len(ledger) == 0


def test_some_acks_before_init_some_after(ledger):
    play(ledger, [
        (("ack", ROOT, E2), None),
        (("init", ROOT, E1 ^ E2, TASK), None),
        (("ack", ROOT, E1), TreeAcked(ROOT, TASK)),
    ])


# The spout emits to two tasks (edges E1, E2); a joining bolt receives both and
# emits one child anchored to both, which gets one new edge per anchor (X for
# the first, Y for the second): its id for ROOT is X ^ Y. The bolt acks each
# input with its edge XOR the new edge anchored to it; a leaf bolt acks the child.
MULTI_ANCHOR = [
    ("init", ROOT, E1 ^ E2, TASK),
    ("ack", ROOT, E1 ^ X),
    ("ack", ROOT, E2 ^ Y),
    ("ack", ROOT, X ^ Y),
]


@pytest.mark.parametrize("order", list(itertools.permutations(range(len(MULTI_ANCHOR)))))
def test_multi_anchored_tree_completes_only_when_every_edge_is_acked(ledger, order):
    events = [MULTI_ANCHOR[i] for i in order]
    table = [(e, None) for e in events[:-1]] + [(events[-1], TreeAcked(ROOT, TASK))]
    play(ledger, table)
    assert len(ledger) == 0


def test_multi_anchored_tree_missing_child_ack_stays_pending(ledger):
    play(ledger, [(e, None) for e in MULTI_ANCHOR[:-1]])
    assert ROOT in ledger.pending


def test_fail_after_init_fails_the_tree(ledger):
    play(ledger, [
        (("init", ROOT, E1 ^ E2, TASK), None),
        (("ack", ROOT, E1), None),
        (("fail", ROOT), TreeFailed(ROOT, TASK)),
    ])
    assert len(ledger) == 0


def test_fail_before_init_fails_when_init_arrives(ledger):
    play(ledger, [
        (("fail", ROOT), None),
        (("ack", ROOT, E1), None),
        (("init", ROOT, E1 ^ E2, TASK), TreeFailed(ROOT, TASK)),
    ])
    assert len(ledger) == 0


def test_reset_timeout_answers_and_extends_the_tree_life():
    led = AckerLedger(num_buckets=3)
    other = ROOT + 1
    play(led, [
        (("init", ROOT, E1, TASK), None),
        (("init", other, E2, TASK), None),
        (("rotate",), 0),
        (("rotate",), 0),
        # Both trees are now on death row; only ROOT asks for more time.
        (("reset_timeout", ROOT), TimeoutReset(ROOT, TASK)),
        (("rotate",), 1),
        (("rotate",), 0),
    ])
    assert other not in led.pending
    play(led, [(("ack", ROOT, E1), TreeAcked(ROOT, TASK))])
    led.validate_state()


def test_reset_timeout_of_unknown_root_is_ignored(ledger):
    play(ledger, [(("reset_timeout", ROOT), None)])
    assert len(ledger) == 0


def test_acks_do_not_extend_a_tree_life():
    led = AckerLedger(num_buckets=2)
    play(led, [
        (("init", ROOT, E1 ^ E2, TASK), None),
        (("rotate",), 0),
        (("ack", ROOT, E1), None),
        (("rotate",), 1),
    ])
    assert ROOT not in led.pending


def test_rotation_forgets_stale_trees_without_instructions(ledger):
    roots = [ROOT, ROOT + 1, ROOT + 2]
    play(ledger, [(("init", r, E1, TASK), None) for r in roots])
    assert len(ledger) == 3
    play(ledger, [(("rotate",), 0), (("rotate",), 0), (("rotate",), 3)])
    assert len(ledger) == 0
    # The final ack of a forgotten tree comes too late: no instruction (the spout times it out).
    play(ledger, [(("ack", ROOT, E1), None)])


def _bolt_messages(rng, root, edge, depth):
    """A bolt receives the tuple with ``edge``, emits anchored children and acks; recurse."""
    n = rng.randint(0, 3) if depth < 3 else 0
    children = [rng.getrandbits(64) for _ in range(n)]
    msgs = [("ack", root, reduce(xor, children, edge))]
    for child in children:
        msgs += _bolt_messages(rng, root, child, depth + 1)
    return msgs


def _random_tree(rng):
    root = rng.getrandbits(64)
    task = rng.randrange(0, 64)
    edges = [rng.getrandbits(64), rng.getrandbits(64)]  # the spout emits to two tasks
    msgs = [("init", root, edges[0] ^ edges[1], task)]
    for e in edges:
        msgs += _bolt_messages(rng, root, e, 1)
    return root, task, msgs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_trees_complete_exactly_at_their_last_message(ledger, seed):
    rng = random.Random(seed)
    completed = 0
    for _ in range(20):  # 20 rounds of 10 interleaved trees
        trees = [_random_tree(rng) for _ in range(10)]
        stream = [(root, task, m) for root, task, msgs in trees for m in msgs]
        rng.shuffle(stream)
        remaining = {root: len(msgs) for root, _, msgs in trees}
        for root, task, (op, *args) in stream:
            remaining[root] -= 1
            got = getattr(ledger, op)(*args)
            if remaining[root]:
                assert got is None, (root, op, remaining[root])
            else:
                assert got == TreeAcked(root, task)
                completed += 1
        assert len(ledger) == 0
    assert completed == 200


def test_batched_init_and_ack_lists_answer_as_the_single_calls(ledger):
    """The acker executor hands a whole ``__ack_init`` / ``__ack_ack`` tuple's flat list to
    init_all / ack_all: the same instructions, in order, as one call per entry."""
    rng = random.Random(5)
    roots = [rng.getrandbits(64) | 2 for _ in range(300)]
    edges = [rng.getrandbits(64) | 1 for _ in roots]
    single = AckerLedger()
    inits = [x for r, e in zip(roots, edges) for x in (r, e, TASK)]
    # Some trees acked before their init, some after; one ack leaves its tree pending.
    early = [x for r, e in zip(roots[:100], edges[:100]) for x in (r, e)]
    late = [x for r, e in zip(roots[100:], edges[100:]) for x in (r, e)]
    late[1] ^= 1
    want = [single.ack(*early[i:i + 2]) for i in range(0, len(early), 2)]
    want += [single.init(*inits[i:i + 3]) for i in range(0, len(inits), 3)]
    want += [single.ack(*late[i:i + 2]) for i in range(0, len(late), 2)]
    got = ledger.ack_all(early) + ledger.init_all(inits) + ledger.ack_all(late)
    assert got == [r for r in want if r is not None]
    assert len(got) == 299 and all(type(r) is TreeAcked for r in got)
    assert len(ledger) == len(single) == 1
    assert ledger.ack_all([]) == [] and ledger.init_all([roots[0]]) == []  # a ragged tail
