"""shenweichen/DeepCTR-Torch: ``din`` (Deep Interest Network with a behaviour sequence of 4 items and its
length feature, as its run_din example builds it) and ``deepfm`` (DeepFM over sparse and dense features), on a
batch of 4; training: binary cross-entropy on click labels.

Shim: the package imports TensorFlow's Keras callbacks for its fit loop (callbacks.py, basemodel.py), which
the models do not use here; the driver puts empty stand-ins for those modules in ``sys.modules``."""

import importlib.machinery
import sys
import types

import torch
import torch.nn.functional as F


def _stub():
    """Empty stand-ins for the TensorFlow modules the fit loop imports (callbacks.py, basemodel.py). Each has a
    spec without an origin: Dynamo asks ``importlib.util.find_spec("tensorflow")`` the first time it compiles in
    a process, which raises on a module without one; the harness drops the stand-ins after the row
    (``_mend_stand_in``)."""
    names = ["tensorflow", "tensorflow.python", "tensorflow.python.keras", "tensorflow.python.keras.callbacks"]
    for name in names:
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__spec__ = importlib.machinery.ModuleSpec(name, None)
            module._mend_stand_in = True
            sys.modules[name] = module
    cb = sys.modules["tensorflow.python.keras.callbacks"]
    for cls in ("History", "EarlyStopping", "ModelCheckpoint", "CallbackList"):
        setattr(cb, cls, getattr(cb, cls, None) or type(cls, (), {}))


def _x(model, values):
    cols = []
    for name, (start, end) in sorted(model.feature_index.items(), key=lambda kv: kv[1][0]):
        v = values[name]
        cols.append(v.float().reshape(v.shape[0], -1)[:, : end - start])
    return torch.cat(cols, dim=1)


def _loss(mode):
    clicks = torch.tensor([[1.0], [0.0], [1.0], [0.0]])
    return (lambda out: (F.binary_cross_entropy(out, clicks), "driver")) if mode == "train" else None


def din(repo, mode):
    _stub()
    from deepctr_torch.inputs import DenseFeat, SparseFeat, VarLenSparseFeat
    from deepctr_torch.models import DIN

    feats = [SparseFeat("user", 4, embedding_dim=8), SparseFeat("gender", 2, embedding_dim=8),
             SparseFeat("item_id", 4, embedding_dim=8), SparseFeat("cate_id", 3, embedding_dim=8),
             DenseFeat("pay_score", 1)]
    feats += [VarLenSparseFeat(SparseFeat("hist_item_id", 4, embedding_dim=8, embedding_name="item_id"), maxlen=4,
                               length_name="seq_length"),
              VarLenSparseFeat(SparseFeat("hist_cate_id", 3, embedding_dim=8, embedding_name="cate_id"), maxlen=4,
                               length_name="seq_length")]
    model = DIN(feats, ["item_id", "cate_id"], device="cpu", att_weight_normalization=True)
    values = {"user": torch.tensor([0, 1, 2, 3]), "gender": torch.tensor([0, 1, 0, 1]),
              "item_id": torch.tensor([1, 2, 3, 1]), "cate_id": torch.tensor([1, 2, 2, 1]),
              "pay_score": torch.tensor([0.1, 0.2, 0.3, 0.2]),
              "hist_item_id": torch.tensor([[1, 2, 3, 0], [1, 2, 0, 0], [1, 2, 3, 3], [3, 0, 0, 0]]),
              "hist_cate_id": torch.tensor([[1, 2, 2, 0], [1, 2, 0, 0], [1, 2, 2, 2], [2, 0, 0, 0]]),
              "seq_length": torch.tensor([3, 2, 4, 1])}
    return {"model": model, "args": (_x(model, values),), "loss": _loss(mode)}


def deepfm(repo, mode):
    _stub()
    from deepctr_torch.inputs import DenseFeat, SparseFeat
    from deepctr_torch.models import DeepFM

    feats = [SparseFeat(f"c{i}", 10, embedding_dim=4) for i in range(3)] + [DenseFeat(f"d{i}", 1) for i in range(2)]
    model = DeepFM(feats, feats, dnn_hidden_units=(16, 8), device="cpu")
    g = torch.Generator().manual_seed(1)
    values = {f"c{i}": torch.randint(0, 10, (4,), generator=g) for i in range(3)}
    values.update({f"d{i}": torch.rand(4, generator=g) for i in range(2)})
    return {"model": model, "args": (_x(model, values),), "loss": _loss(mode)}


ROWS = {"din": din, "deepfm": deepfm}
