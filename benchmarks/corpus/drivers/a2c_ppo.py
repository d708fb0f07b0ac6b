"""ikostrikov/pytorch-a2c-ppo-acktr-gail: the recurrent (GRU) MLP policy with a discrete action head. Eval:
``Policy.act`` for 2 environments (one step); training: ``evaluate_actions`` over a rollout of 4 steps x 2
environments with episode ends inside it (the masks split the GRU's sequence, as PPO's update does), and the
PPO-style loss (value error, policy gradient, entropy).

Shim: ``a2c_ppo_acktr.utils`` imports the environment wrappers (``envs``: gym and OpenAI baselines) for one
class it does not use here; the driver gives it an empty ``envs`` module."""

import sys
import types

import torch
from torch import nn


class Discrete:
    def __init__(self, n):
        self.n = n


Discrete.__name__ = "Discrete"


def build(repo, mode):
    envs = types.ModuleType("a2c_ppo_acktr.envs")
    envs.VecNormalize = type("VecNormalize", (), {})
    sys.modules["a2c_ppo_acktr.envs"] = envs
    from a2c_ppo_acktr.model import Policy

    policy = Policy((6,), Discrete(3), base_kwargs={"recurrent": True, "hidden_size": 16})
    g = torch.Generator().manual_seed(1)
    if mode == "eval":
        class Act(nn.Module):
            def __init__(self):
                super().__init__()
                self.policy = policy

            def forward(self, obs, hxs, masks):
                return self.policy.act(obs, hxs, masks, deterministic=True)

        return {"model": Act(), "args": (torch.randn(2, 6, generator=g), torch.zeros(2, 16), torch.ones(2, 1))}

    class Evaluate(nn.Module):
        def __init__(self):
            super().__init__()
            self.policy = policy

        def forward(self, obs, hxs, masks, actions):
            return self.policy.evaluate_actions(obs, hxs, masks, actions)

    obs = torch.randn(8, 6, generator=g)
    masks = torch.ones(8, 1)
    masks[4] = 0.0  # an episode ended before step 2 of environment 0
    masks[7] = 0.0
    actions = torch.randint(0, 3, (8, 1), generator=g)
    returns = torch.randn(8, 1, generator=g)
    advantages = torch.randn(8, 1, generator=g)

    def loss(out):
        value, log_probs, entropy, _ = out
        return ((returns - value) ** 2).mean() * 0.5 - (advantages * log_probs).mean() - 0.01 * entropy, "driver"

    return {"model": Evaluate(), "args": (obs, torch.zeros(2, 16), masks, actions), "loss": loss}
