"""Programs and checkpoint surgery shared by the adversarial tests.

`reseal` rewrites a checkpoint the way an attacker with write access would: after editing
a file it fixes that file's size and SHA-256 in the manifest and the manifest's own
checksum (all of them are public, so they authenticate nothing; they detect accidents).
"""
import hashlib
import json
import pathlib

import numpy as np
from distributed.nets import FitALine

import fluid
from fluid_interactive.runtime.live import checkpoint

W = "prediction/fc_0.w_0"
TMP = "prediction/fc_0.tmp_0"


def batch(rows=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, 13)).astype("float32"),
            rng.standard_normal((rows, 1)).astype("float32"))


def saved(path) -> pathlib.Path:
    prog = FitALine().Compile(seed=0)
    prog.train_step(*batch())
    prog.save(str(path))
    return pathlib.Path(path)


def manifest(path) -> dict:
    return json.loads((pathlib.Path(path) / checkpoint.MANIFEST).read_text())


def write_manifest(path, doc: dict) -> None:
    doc = dict(doc)
    doc["manifest_sha256"] = checkpoint._manifest_digest(doc)
    (pathlib.Path(path) / checkpoint.MANIFEST).write_text(json.dumps(doc))


def reseal(path, name: str, data: bytes, doc: dict = None) -> None:
    """Replace the file ``name`` of the checkpoint and fix every checksum that covers it."""
    path = pathlib.Path(path)
    (path / name).write_bytes(data)
    doc = manifest(path) if doc is None else doc
    doc["files"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    write_manifest(path, doc)


def edit_program(path, edit) -> None:
    """Apply ``edit(program_json_dict)`` to program.json and reseal the checkpoint."""
    doc = json.loads((pathlib.Path(path) / checkpoint.PROGRAM).read_text())
    edit(doc)
    reseal(path, checkpoint.PROGRAM, json.dumps(doc).encode())


def rename_everywhere(doc, old: str, new: str):
    """Every occurrence of the name ``old`` in a program JSON document, renamed."""
    if isinstance(doc, dict):
        return {rename_everywhere(k, old, new): rename_everywhere(v, old, new)
                for k, v in doc.items()}
    if isinstance(doc, list):
        return [rename_everywhere(v, old, new) for v in doc]
    return new if doc == old else doc


class Loop(fluid.Program):
    @fluid.network("x")
    def train_step(self, x):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        h = fluid.layers.fc(input=x, size=4)
        i = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
        n = fluid.layers.fill_constant(shape=[1], dtype="int64", value=3)
        cond = fluid.layers.less_than(x=i, y=n)
        loop = fluid.layers.While(cond=cond)
        with loop.block():
            fluid.layers.assign(fluid.layers.tanh(h), output=h)
            fluid.layers.increment(x=i, value=1, in_place=True)
            fluid.layers.less_than(x=i, y=n, cond=cond)
        loss = fluid.layers.mean(h)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss
