"""kzl/decision-transformer: the gym Decision Transformer (its own GPT-2 copy, trajectory_gpt2.py) with
hidden size 32, 2 layers; 2 trajectories of 10 steps of (return-to-go, state, action), the first padded
(attention mask) as its batch sampler pads; training: mean square error of the predicted actions on the
unpadded steps, as its SequenceTrainer computes it.

Shim: trajectory_gpt2.py decorates its forward with transformers 4.5's ``add_code_sample_docstrings``
signature (``tokenizer_class=``), which later releases reject; the driver makes the decorator a no-op (it only
writes docstrings)."""

import torch


def build(repo, mode):
    import transformers.file_utils as fu

    fu.add_code_sample_docstrings = lambda *a, **k: (lambda f: f)  # 4.5's signature; only decorates docstrings
    from decision_transformer.models.decision_transformer import DecisionTransformer

    model = DecisionTransformer(state_dim=6, act_dim=3, hidden_size=32, max_length=10, max_ep_len=100,
                                n_layer=2, n_head=2, n_inner=64, activation_function="relu", n_positions=64, n_ctx=64,
                                resid_pdrop=0.1, attn_pdrop=0.1)
    g = torch.Generator().manual_seed(1)
    states = torch.randn(2, 10, 6, generator=g)
    actions = torch.rand(2, 10, 3, generator=g) * 2 - 1
    rewards = torch.randn(2, 10, 1, generator=g)
    rtg = torch.randn(2, 10, 1, generator=g)
    timesteps = torch.arange(10).repeat(2, 1)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[0, :3] = 0

    def loss(out):
        action_preds = out[1]
        keep = mask.reshape(-1) > 0
        return ((action_preds.reshape(-1, 3)[keep] - actions.reshape(-1, 3)[keep]) ** 2).mean(), "driver"

    return {"model": model, "args": (states, actions, rewards, rtg, timesteps), "kwargs": {"attention_mask": mask},
            "loss": loss if mode == "train" else None}
