"""Valid inputs for a corpus model, from its manifest entry: the same arrays for every
engine (token ids within the vocabulary, position ids within the rotary table, masks of
0 and 1), drawn from a fixed seed."""
import json
import os

import numpy as np

DTYPES = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


def make_inputs(entry, seed=0):
    """{input name: array} for a manifest entry (a dict with "inputs")."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in entry["inputs"]:
        shape, values, dtype = spec["shape"], spec["values"], DTYPES[spec["dtype"]]
        kind = values["kind"]
        if kind == "normal":
            a = rng.standard_normal(shape) * values.get("std", 1.0)
        elif kind == "uniform":
            a = rng.uniform(values["low"], values["high"], shape)
        elif kind == "integer":
            a = rng.integers(values["low"], values["high"], size=shape)
        else:
            raise ValueError(f"{entry['name']}: input {spec['name']}: unknown value kind {kind!r}")
        feeds[spec["name"]] = np.asarray(a).astype(dtype)
    return feeds


def load_manifest(corpus_dir):
    """The manifest's entries by name, with "path" made absolute."""
    with open(os.path.join(corpus_dir, "manifest.json")) as f:
        manifest = json.load(f)
    out = {}
    for e in manifest["models"]:
        e = dict(e)
        e["path"] = os.path.join(corpus_dir, e["file"])
        out[e["name"]] = e
    return out
