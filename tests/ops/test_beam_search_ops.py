"""beam_search and beam_search_decode over padded batches: Paddle 1.8's unit-test cases
in their padded form (a source's rows together, the parents given), against a NumPy
reference of the op's rules written here, with ended rows, probabilities and ids left
out; the decode as a program with tensor arrays on the host and the device stand-in; and
their errors. Neither op has a gradient."""
import numpy as np
import pytest
from ops.harness import check_block, check_op
from ops.traced import traced_types

import fluid
from fluid_interactive.errors import DTypeError, ShapeError

L = fluid.layers


def _beam_search_reference(pre_ids, pre_scores, scores, beam_size, end_id,
                           is_accumulated=True, ids=None, **_):
    """Per source (beam_size rows), every candidate (row, id, score) — an ended row offers
    only (end_id, its score) — the beam_size best kept, listed by row, best first."""
    n, k = scores.shape
    ids = np.tile(np.arange(k), (n, 1)) if ids is None else ids
    out_ids, out_scores, parents = [], [], []
    for start in range(0, n, beam_size):
        found = []
        for row in range(start, start + beam_size):
            if pre_ids[row, 0] == end_id:
                found.append((pre_scores[row, 0], row, end_id))
                continue
            for c in range(k):
                s = scores[row, c] if is_accumulated else \
                    pre_scores[row, 0] + np.log(scores[row, c])
                found.append((s, row, ids[row, c]))
        best = sorted(found, key=lambda f: -f[0])[:beam_size]
        for s, row, i in sorted(best, key=lambda f: f[1]):   # stable: best first per row
            out_ids.append(i)
            out_scores.append(s)
            parents.append(row)
    return {"selected_ids": np.array(out_ids)[:, None],
            "selected_scores": np.array(out_scores, pre_scores.dtype)[:, None],
            "parent_idx": np.array(parents, np.int32)}


PADDLE_IDS = np.array([[4, 2, 5], [2, 1, 3], [3, 5, 2], [8, 2, 1]], "int64")
PADDLE_SCORES = np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.9, 0.5, 0.1],
                          [0.7, 0.5, 0.1]], "float32")


def test_beam_search_on_paddles_case():
    """Two sources of two rows each (Paddle's lod [[0, 2, 4], [0, 1, 2, 3, 4]])."""
    got = check_op("beam_search", {"pre_ids": np.array([[1], [2], [3], [4]], "int64"),
                                   "pre_scores": np.array([[.1], [.2], [.3], [.4]], "float32"),
                                   "ids": PADDLE_IDS, "scores": PADDLE_SCORES},
                   {"beam_size": 2, "end_id": 0}, reference=_beam_search_reference,
                   output_counts={"parent_idx": 1})
    np.testing.assert_array_equal(got["selected_ids"][0][:, 0], [4, 2, 3, 8])
    np.testing.assert_allclose(got["selected_scores"][0][:, 0], [0.5, 0.6, 0.9, 0.7])
    np.testing.assert_array_equal(got["parent_idx"][0], [0, 1, 2, 3])


@pytest.mark.parametrize("accumulated", [True, False])
@pytest.mark.parametrize("with_ids", [True, False])
def test_beam_search_with_ended_rows_probabilities_and_implicit_ids(rng, accumulated,
                                                                    with_ids):
    beam, k, sources = 3, 5, 4
    n = beam * sources
    pre_ids = rng.integers(1, 9, (n, 1)).astype("int64")
    pre_ids[[1, 4, 5, 9]] = 0                       # ended rows (end_id 0)
    inputs = {"pre_ids": pre_ids, "pre_scores": rng.uniform(-3, 0, (n, 1)),
              "scores": rng.uniform(0.05, 1, (n, k)) if not accumulated else
              rng.uniform(-6, 0, (n, k))}
    if with_ids:
        inputs["ids"] = rng.integers(0, 50, (n, k)).astype("int64")
    attrs = {"beam_size": beam, "end_id": 0, "is_accumulated": accumulated}
    check_op("beam_search", inputs, attrs, reference=_beam_search_reference,
             output_counts={"parent_idx": 1}, rtol=1e-12, atol=1e-12)


def test_beam_search_shape_rule_and_errors():
    types = {"pre_ids": ((-1, 1), "int64"), "pre_scores": ((-1, 1), "float32"),
             "scores": ((-1, 5), "float32")}
    assert traced_types("beam_search", types, {"beam_size": 2},
                        counts={"selected_ids": 1, "selected_scores": 1, "parent_idx": 1}) == [
        ((-1, 1), "int64"), ((-1, 1), "float32"), ((-1,), "int32")]
    with pytest.raises(ShapeError, match=r"the 6 rows are not whole sources of beam_size=4"):
        traced_types("beam_search", {k: ((6,) + t[0][1:], t[1]) for k, t in types.items()},
                     {"beam_size": 4}, counts={"selected_ids": 1, "selected_scores": 1})
    with pytest.raises(DTypeError, match=r"pre_ids must be int64, got float32"):
        traced_types("beam_search", {**types, "pre_ids": ((-1, 1), "float32")},
                     {"beam_size": 2}, counts={"selected_ids": 1, "selected_scores": 1})


# --- beam_search_decode ---------------------------------------------------------------------

# Paddle's case (5 steps, 2 sources, beam 2, end 1) in padded form: each step's ids of the
# 4 rows and the row of the step before each extends (rows 1 and 3 of the first step are
# the sources' idle copies); the scores are the ids, as in Paddle's test.
STEP_IDS = [[0, 0, 0, 0], [2, 3, 4, 5], [3, 1, 5, 4], [1, 1, 3, 5], [1, 1, 5, 1]]
STEP_PARENTS = [[0, 1, 2, 3], [0, 0, 2, 2], [0, 0, 2, 2], [0, 1, 2, 3], [0, 1, 2, 2]]


def _decode(first_parents=True):
    def build():
        arrays = [L.create_array(t) for t in ("int64", "float32", "int32")]
        for t in range(len(STEP_IDS)):
            i = L.fill_constant([1], "int64", t)
            ids = L.data(f"ids{t}", shape=[4, 1], dtype="int64", append_batch_size=False)
            L.array_write(ids, i, array=arrays[0])
            L.array_write(L.cast(ids, "float32"), i, array=arrays[1])
            if t or first_parents:
                parents = L.data(f"parents{t}", shape=[4], dtype="int32",
                                 append_batch_size=False)
                L.array_write(parents, L.fill_constant([1], "int64", t - (not first_parents)),
                              array=arrays[2])
        return list(L.beam_search_decode(arrays[0], arrays[1], beam_size=2, end_id=1,
                                         parent_idx=arrays[2], return_length=True))
    return build


@pytest.mark.parametrize("first_parents", [True, False])
def test_beam_search_decode_on_paddles_case(first_parents):
    feeds = {f"ids{t}": np.array(ids, "int64")[:, None] for t, ids in enumerate(STEP_IDS)}
    feeds.update({f"parents{t}": np.array(p, "int32") for t, p in enumerate(STEP_PARENTS)
                  if t or first_parents})
    ids, scores, lengths = check_block(_decode(first_parents), feeds)
    want = [[[0, 2, 3, 1, 1], [0, 2, 1, 1, 1]], [[0, 4, 5, 3, 5], [0, 4, 5, 3, 1]]]
    np.testing.assert_array_equal(ids, want)               # padded with end_id
    np.testing.assert_array_equal(lengths, [[4, 3], [5, 5]])
    valid = np.arange(5)[None, None, :] < lengths[..., None]
    np.testing.assert_array_equal(scores, np.where(valid, want, 0))


def test_beam_search_decode_checks_its_parents():
    feeds = {f"ids{t}": np.array(ids, "int64")[:, None] for t, ids in enumerate(STEP_IDS)}
    feeds.update({f"parents{t}": np.array(p, "int32") for t, p in enumerate(STEP_PARENTS)})
    feeds["parents3"] = np.array([0, 1, 2, 4], "int32")
    prog = type("P", (fluid.Program,), {"f": fluid.network(*feeds)(
        lambda self, *a: _decode()())})().Compile()
    with pytest.raises(fluid.KernelError, match=r"parent row 4 at position \[3, 3\] is out of "
                                                r"range: indices must lie in \[0, 4\)"):
        prog.f(**feeds)


@pytest.mark.parametrize("build,error,match", [
    (lambda ids, scores: L.beam_search_decode(ids, scores, 2, 1), TypeError,
     r"beam_search_decode: a padded beam search needs parent_idx="),
    (lambda ids, scores: L.beam_search_decode(np.zeros((4, 1)), scores, 2, 1,
                                              parent_idx=ids), TypeError,
     r"beam_search_decode: ids must be a fluid Variable"),
    (lambda ids, scores: L.beam_search_decode(scores, scores, 2, 1, parent_idx=ids),
     TypeError, r"beam_search_decode: ids .* must be int64"),
    (lambda ids, scores: L.beam_search_decode(L.fill_constant([2, 1], "int64", 0), scores, 2,
                                              1, parent_idx=ids), TypeError,
     r"beam_search_decode: ids must be a tensor array holding one element per step"),
    (lambda ids, scores: L.beam_search(ids, scores, None, L.cast(ids, "float32"), 2, 1,
                                       level=1), TypeError, r"level must be 0"),
    (lambda ids, scores: L.beam_search(L.cast(ids, "float32"), scores, None, scores, 2, 1),
     TypeError, r"beam_search: pre_ids .* must be int64"),
    (lambda ids, scores: L.beam_search(np.zeros((4, 1), "int64"), scores, None, scores, 2,
                                       1), TypeError, r"pre_ids must be a fluid Variable"),
])
def test_layer_errors_name_the_users_line(build, error, match):
    def f(self, ids, scores):
        ids = L.data("ids", shape=[-1, 1], dtype="int64", append_batch_size=False)
        scores = L.data("scores", shape=[-1, 1], dtype="float32", append_batch_size=False)
        ids_array, scores_array = L.array_write(ids, L.fill_constant([1], "int64", 0)), \
            L.array_write(scores, L.fill_constant([1], "int64", 0))
        array_or_var = (ids_array, scores_array) if "decode" in match else (ids, scores)
        return build(*array_or_var)[0]
    prog = type("P", (fluid.Program,), {"f": fluid.network("ids", "scores")(f)})()
    with pytest.raises(error, match=rf"(?s){match}.*test_beam_search_ops.py:\d+"):
        prog.Compile()


def test_a_decode_loop_in_the_book_style(rng):
    """beam_search in a While over a tensor array of steps, beam_search_decode after it:
    the selections of every step backtrack to whole hypotheses; the best of each source is
    the one a NumPy search keeps."""
    vocab, beam, steps = 6, 2, 4
    table = rng.uniform(-2, 0, (vocab, vocab))                # log p(next | last id)
    table[:, 1] = rng.uniform(-0.9, -0.5, vocab)               # id 1, the end, comes often
    starts = np.repeat([[0], [2], [3]], beam, axis=0)           # each source's first id

    class Loop(fluid.Program):
        @fluid.network("n")
        def decode(self, n):
            n = L.data("n", shape=[1], dtype="int64", append_batch_size=False)
            rows = L.assign(starts)
            first = L.assign(np.tile([[0.0], [-1e9]], (3, 1)).astype("float32"))
            ids_a, scores_a = L.array_write(rows, L.fill_constant([1], "int64", 0)), \
                L.array_write(first, L.fill_constant([1], "int64", 0))
            parents_a = L.create_array("int32")
            logp = L.assign(table.astype("float32"))
            i = L.fill_constant([1], "int64", 0)
            loop = L.While(L.less_than(i, n))
            with loop.block():
                pre_ids, pre_scores = L.array_read(ids_a, i), L.array_read(scores_a, i)
                cand = L.gather(logp, L.reshape(pre_ids, [-1])) + pre_scores
                top, top_ids = L.topk(cand, beam)
                sel, sel_scores, parent = L.beam_search(pre_ids, pre_scores, top_ids, top,
                                                        beam, end_id=1,
                                                        return_parent_idx=True)
                L.array_write(parent, i, array=parents_a)    # one fewer: none at step 0
                L.increment(i, in_place=True)
                L.array_write(sel, i, array=ids_a)
                L.array_write(sel_scores, i, array=scores_a)
                L.less_than(i, n, cond=loop.cond)
            return L.beam_search_decode(ids_a, scores_a, beam, 1, parent_idx=parents_a,
                                        return_length=True)

    ids, scores, lengths = Loop().Compile().decode(np.array([steps]))
    assert ids.shape == (3, beam, steps + 1)
    want_ids, want_scores = _numpy_loop(table, beam, steps, starts, end=1)
    for b in range(3):
        for j in range(beam):
            n = lengths[b, j]
            np.testing.assert_array_equal(ids[b, j, :n], want_ids[b][j])
            np.testing.assert_allclose(scores[b, j, :n], want_scores[b][j], rtol=1e-5)
    assert (lengths < steps + 1).any()                    # some hypothesis ended


def _numpy_loop(table, beam, steps, starts, end):
    """The same loop with the reference step, then each final row traced back by hand:
    per source, its hypotheses (ids, scores) best first."""
    n = len(starts)
    sources = n // beam
    pre_ids = starts
    pre_scores = np.tile([[0.0], [-1e9]], (sources, 1))
    history = [(pre_ids[:, 0], pre_scores[:, 0], np.arange(n))]
    for _ in range(steps):
        cand = table[pre_ids[:, 0]] + pre_scores
        top_ids = np.argsort(-cand, axis=1)[:, :beam]
        got = _beam_search_reference(pre_ids, pre_scores, np.take_along_axis(cand, top_ids, 1),
                                     beam, end, ids=top_ids)
        pre_ids, pre_scores = got["selected_ids"], got["selected_scores"]
        history.append((pre_ids[:, 0], pre_scores[:, 0], got["parent_idx"]))
    hypotheses = []
    for row in range(n):
        ids, scores, r = [], [], row
        for step_ids, step_scores, parents in reversed(history):
            if step_ids[r] != end or not ids:      # one end id kept, at the final score
                ids.append(step_ids[r])
                scores.append(step_scores[r])
            r = parents[r]
        hypotheses.append((ids[::-1], scores[::-1]))
    by_source = []
    for b in range(sources):
        mine = sorted(hypotheses[b * beam:(b + 1) * beam], key=lambda h: -h[1][-1])
        by_source.append(mine)
    return [[h[0] for h in s] for s in by_source], [[h[1] for h in s] for s in by_source]


def _decode_types(ids=((-1, 1), "int64", "tensor_array"), scores=((-1, 1), "float32",
                  "tensor_array"), parents=((-1,), "int32", "tensor_array"), beam=2):
    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.ops import infer_op
    from fluid_interactive.ops.spec import TensorType
    env = {"i": TensorType(*ids), "s": TensorType(*scores), "p": TensorType(*parents)}
    op = OpDesc("beam_search_decode", {"Ids": ["i"], "Scores": ["s"], "ParentIdx": ["p"]},
                {"SentenceIds": ["a"], "SentenceScores": ["b"], "SentenceLengths": ["c"]},
                {"beam_size": beam, "end_id": 1})
    return {k: (t[0].shape, t[0].dtype) for k, t in infer_op(op, env.__getitem__).items()}


def test_shape_rules_of_the_decode_and_their_errors():
    assert _decode_types(ids=((6, 1), "int64", "tensor_array")) == {
        "SentenceIds": ((3, 2, -1), "int64"), "SentenceScores": ((3, 2, -1), "float32"),
        "SentenceLengths": ((3, 2), "int64")}
    cases = [
        ({"ids": ((-1, 1), "int64", "tensor")}, ShapeError,
         r"Ids must be a tensor array holding one element per step"),
        ({"scores": ((-1, 1), "int32", "tensor_array")}, DTypeError,
         r"Scores must be an array of float32 or float64, got int32"),
        ({"ids": ((-1, 3), "int64", "tensor_array")}, ShapeError,
         r"the elements of Ids must be \[N, 1\]"),
        ({"parents": ((-1, 1), "int32", "tensor_array")}, ShapeError,
         r"the elements of ParentIdx must be \[N\]"),
        ({"ids": ((4, 1), "int64", "tensor_array"), "parents": ((6,), "int32",
                                                                 "tensor_array")},
         ShapeError, r"Ids \[4, 1\], Scores \[\?, 1\], ParentIdx \[6\] must have one row per"),
        ({"beam": 0}, ShapeError, r"beam_size must be a positive int, got 0"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            _decode_types(**kwargs)


def test_shape_rule_errors_of_a_step():
    types = {"pre_ids": ((-1, 1), "int64"), "pre_scores": ((-1, 1), "float32"),
             "scores": ((-1, 5), "float32")}
    counts = {"selected_ids": 1, "selected_scores": 1}
    with pytest.raises(ShapeError, match=r"ids \[\?, 4\] and scores \[\?, 5\] must list as "
                                         r"many candidates per row"):
        traced_types("beam_search", {**types, "ids": ((-1, 4), "int64")}, {"beam_size": 2},
                     counts=counts)
    with pytest.raises(ShapeError, match=r"pre_scores must be \[N, 1\]"):
        traced_types("beam_search", {**types, "pre_scores": ((-1, 2), "float32")},
                     {"beam_size": 2}, counts=counts)
    with pytest.raises(ShapeError, match=r"level must be 0"):
        traced_types("beam_search", types, {"beam_size": 2, "level": 1}, counts=counts)


def test_the_decode_needs_as_many_steps_of_ids_and_scores():
    def build():
        ids = L.data("ids", shape=[4, 1], dtype="int64", append_batch_size=False)
        parents = L.data("parents", shape=[4], dtype="int32", append_batch_size=False)
        zero, one = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 1)
        ids_a = L.array_write(ids, zero)
        L.array_write(ids, one, array=ids_a)
        scores_a = L.array_write(L.cast(ids, "float32"), zero)
        return L.beam_search_decode(ids_a, scores_a, 2, 1, parent_idx=L.array_write(
            parents, zero))[0]
    prog = type("P", (fluid.Program,), {"f": fluid.network("ids", "parents")(
        lambda self, ids, parents: build())})().Compile()
    with pytest.raises(fluid.KernelError, match=r"Ids and Scores must hold one element per "
                                                r"step .* got 2, 1 and 1"):
        prog.f(np.zeros((4, 1), np.int64), np.arange(4, dtype=np.int32))
