"""Training steps: the loss, the gradients as compared, the random-number digest, and the backend that counts
forward and backward graphs."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from benchmarks.zoo.train import NO_GRAD, TrainBackend, grads, loss_of, rng_digest, seed_all  # noqa: E402


def test_the_models_own_loss_is_used_else_the_mean_square_of_the_outputs():
    x = torch.ones(2, requires_grad=True)
    own = {"loss": (x * 3).sum(), "logits": x * 2}
    loss, kind = loss_of(own)
    assert kind == "labels" and loss.item() == 6.0
    loss, kind = loss_of((x * 2, torch.zeros(2)))  # the tensor without history does not count
    assert kind == "outputs" and loss.item() == 4.0
    with pytest.raises(ValueError, match="nothing to train"):
        loss_of(torch.zeros(2))


def test_a_parameter_without_gradient_never_compares_equal_to_one_with_a_gradient():
    m = torch.nn.Linear(2, 2)
    m.bias.requires_grad_(True)
    m(torch.ones(1, 2)).sum().backward()
    m.bias.grad = None
    got = dict(grads(m))
    assert got["grad.weight"].shape == (2, 2) and got["grad.bias"] is NO_GRAD


def test_the_digest_says_whether_random_numbers_were_drawn():
    seed_all(3)
    a = rng_digest()
    seed_all(3)
    assert rng_digest() == a
    torch.rand(1)
    assert rng_digest() != a
    seed_all(3)
    random.random()  # Python's generator counts too (LayerDrop written with random())
    assert rng_digest() != a


def test_the_backend_counts_forward_and_backward_graphs_around_a_break():
    backend = TrainBackend()

    def f(x):
        y = x.sin() * 2
        print("break")  # one graph break: two graphs, each with its backward
        return (y.cos() * 3).sum()

    x = torch.randn(4, requires_grad=True)
    torch._dynamo.reset()
    loss = torch.compile(f, backend=backend)(x)
    loss.backward()
    assert backend.forward_graphs == 2 and backend.backward_graphs == 2
    eager_x = x.detach().clone().requires_grad_()
    f(eager_x).backward()
    assert torch.allclose(x.grad, eager_x.grad)
