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
    init_all / ack_all: the trees the single calls settle, in order, appended to the lists
    of their spout tasks (acked and failed apart), and counted."""
    rng = random.Random(5)
    roots = [rng.getrandbits(64) | 2 for _ in range(300)]
    edges = [rng.getrandbits(64) | 1 for _ in roots]
    tasks = [TASK + i % 3 for i in range(300)]
    single = AckerLedger()
    inits = [x for r, e, t in zip(roots, edges, tasks) for x in (r, e, t)]
    # Some trees acked before their init, some after; one ack leaves its tree pending; one
    # tree failed (its fail went first); roots 0 and 1 take the reserved keys' path.
    early = [x for r, e in zip(roots[:100], edges[:100]) for x in (r, e)]
    late = [x for r, e in zip(roots[100:], edges[100:]) for x in (r, e)]
    late[1] ^= 1
    for lg in (single, ledger):
        assert lg.fail(roots[150]) is None
    want = [single.ack(*early[i:i + 2]) for i in range(0, len(early), 2)]
    want += [single.init(*inits[i:i + 3]) for i in range(0, len(inits), 3)]
    want += [single.ack(*late[i:i + 2]) for i in range(0, len(late), 2)]
    want += [single.init(1, 5, 7), single.ack(1, 5 ^ (1 << 64))]  # the value's low 64 bits
    acked: dict[int, list] = {}
    failed: dict[int, list] = {}
    counts = [ledger.ack_all(early, acked, failed), ledger.init_all(inits, acked, failed),
              ledger.ack_all(late, acked, failed), ledger.init_all([1, 5, 7], acked, failed),
              ledger.ack_all([1, 5 ^ (1 << 64)], acked, failed)]
    by_task: dict[tuple[type, int], list] = {}
    for r in want:
        if r is not None:
            by_task.setdefault((type(r), r.spout_task), []).append(r.root)
    assert {(TreeAcked, t): v for t, v in acked.items()} | \
        {(TreeFailed, t): v for t, v in failed.items()} == by_task
    assert failed == {tasks[150]: [roots[150]]} and sum(map(len, acked.values())) == 299
    assert counts == [(0, 0), (100, 1), (198, 0), (0, 0), (1, 0)]
    # Pending: the tree with the wrong ack, and the failed tree's late ack (waiting for an
    # init that will not come: the rotation forgets it).
    assert len(ledger) == len(single) == 2
    assert ledger.ack_all([], acked, failed) == (0, 0)
    assert ledger.init_all([roots[0]], acked, failed) == (0, 0)  # a ragged tail


def test_a_steps_acks_and_inits_go_to_the_acker_of_each_root():
    """Executor.end_batch sends a step's combined acks and its spout emits to the acker that
    tracks each root, ``ackers[root % len(ackers)]``, as flat lists; an ack XORed back to 0
    (a tuple acked in the step that emitted it) sends nothing."""
    from squall.worker.collector import StepAcks, inits_by_acker

    rng = random.Random(9)
    ackers = [21, 22, 23]
    roots = [0, 1] + [rng.getrandbits(64) for _ in range(2000)]
    step = StepAcks()
    want: dict[int, int] = {}
    for root in roots + roots[:500]:  # some roots twice: combined
        val = rng.getrandbits(64)
        step.xor(root, val)
        want[root] = want.get(root, 0) ^ val
    for root in roots[1000:1100]:
        step.xor(root, want[root])  # back to 0
        want[root] = 0
    per = step.by_acker(ackers)
    got = {}
    for acker, flat in per.items():
        for root, val in zip(flat[::2], flat[1::2]):
            assert acker == ackers[root % 3] and root not in got
            got[root] = val
    assert got == {r: v for r, v in want.items() if v}
    assert all(type(x) is int for flat in per.values() for x in flat)

    flat = [x for r in roots for x in (r, r ^ 5, 7 + r % 2)]
    per = inits_by_acker(flat + [99], ackers)  # a ragged tail is left out
    assert sorted(per) == ackers
    assert {a: [tuple(f[i:i + 3]) for i in range(0, len(f), 3)] for a, f in per.items()} == \
        {a: [(r, r ^ 5, 7 + r % 2) for r in roots if ackers[r % 3] == a] for a in ackers}
