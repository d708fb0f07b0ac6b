"""lucidrains/x-transformers: three rows. ``gpt``: a decoder-only language model through its
AutoregressiveWrapper (the wrapper's own loss; variable lengths in training); ``encdec``: XTransformer on a
copy task (its own loss); ``options``: a decoder with many of the library's options at once (rotary and
ALiBi, memory key/values, layer dropout, sandwich norm, GLU feed-forward, residual attention, memory
tokens). Eval runs the same modules' forward on the same ids (the wrappers return their loss there too)."""

import torch


def _ids(shape, vocab=96):
    return torch.randint(1, vocab, shape, generator=torch.Generator().manual_seed(1))


def gpt(repo, mode):
    from x_transformers import AutoregressiveWrapper, Decoder, TransformerWrapper

    net = TransformerWrapper(num_tokens=96, max_seq_len=32,
                             attn_layers=Decoder(dim=32, depth=2, heads=2, rotary_pos_emb=True, attn_dropout=0.1,
                                                 ff_dropout=0.1))
    model = AutoregressiveWrapper(net)
    return {"model": model, "args": (_ids((2, 17)),), "kwargs": {"lens": torch.tensor([17, 12])},
            "loss": lambda out: (out, "labels")}


def encdec(repo, mode):
    from x_transformers import XTransformer

    model = XTransformer(dim=32, tie_token_emb=True, return_tgt_loss=True, enc_num_tokens=96, enc_depth=1,
                         enc_heads=2, enc_max_seq_len=16, dec_num_tokens=96, dec_depth=1, dec_heads=2,
                         dec_max_seq_len=17)
    src = _ids((2, 16))
    mask = torch.ones_like(src).bool()
    mask[1, 12:] = False
    return {"model": model, "args": (src, torch.cat([torch.ones(2, 1, dtype=torch.long), src], 1)),
            "kwargs": {"mask": mask}, "loss": lambda out: (out, "labels")}


def options(repo, mode):
    from x_transformers import Decoder, TransformerWrapper

    model = TransformerWrapper(
        num_tokens=96, max_seq_len=32, num_memory_tokens=2,
        attn_layers=Decoder(dim=32, depth=3, heads=2, alibi_pos_bias=True, alibi_num_heads=1, attn_num_mem_kv=2,
                            layer_dropout=0.2, sandwich_norm=True, ff_glu=True, residual_attn=True,
                            attn_dropout=0.1, ff_dropout=0.1))
    ids = _ids((2, 16))
    mask = torch.ones_like(ids).bool()
    mask[0, 10:] = False
    return {"model": model, "args": (ids,), "kwargs": {"mask": mask}}


ROWS = {"gpt": gpt, "encdec": encdec, "options": options}
