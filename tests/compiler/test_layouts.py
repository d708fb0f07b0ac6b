"""Outputs keep eager's strides (``lowering.values.eager_strides``: from each FX node's ``meta["val"]``): results of
transposed, permuted, channels-last, expanded and sliced inputs, reductions over them, and outputs that are
views of values the graph computes. ``helpers.assert_same`` compares strides on every dim of more than one
element, so every compiler test checks them; these cases aim at the layouts themselves, on the C++ path,
through Dynamo (where code calls ``.view()`` on an output), and in training (a backward graph is compiled
for the strides of the forward's outputs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mend.compiler.lowering.values import eager_strides

from .helpers import assert_same, check, same_strides, sum_backward_step


def _inputs():
    # seeded: a layer norm over 3 elements is ill-conditioned when they nearly agree (rstd up to 1/sqrt(eps));
    # about 1 random input in 1,500 then rounds 2e-5 away from eager's reduction order
    torch.manual_seed(0)
    base = torch.randn(6, 10, 8)
    return {
        "transposed": base[0].t(),  # (8, 10) strides (1, 8)
        "permuted": base.permute(2, 0, 1),  # (8, 6, 10)
        "channels_last": torch.randn(2, 5, 4, 3).to(memory_format=torch.channels_last),
        "expanded": torch.randn(10, 1).expand(10, 7),
        "sliced": base[:, 2:9:2, 1:],  # gaps and an offset
    }


@pytest.mark.parametrize("kind", sorted(_inputs()))
def test_pointwise_results_keep_eagers_strides(kind):
    x = _inputs()[kind]
    check(lambda x: (x * 2 + 1).sigmoid(), x)
    check(lambda x: (x.exp(), x - 1, (x > 0).float()), x)


@pytest.mark.parametrize("kind", ["transposed", "permuted", "channels_last", "sliced"])
def test_reductions_and_row_groups_keep_eagers_strides(kind):
    x = _inputs()[kind]
    check(lambda x: (x.sum(-1), x.amax(0), x.mean(1, keepdim=True), torch.softmax(x, -1)), x)
    check(lambda x: (x.sum(-1).float() * 2,), x)


def test_channels_last_normalization_and_explicit_memory_formats():
    x = _inputs()["channels_last"]
    check(lambda x: F.layer_norm(x, (3,)) * 2, x)
    y = torch.randn(2, 5, 4, 3)
    check(lambda y: (y * 2).contiguous(memory_format=torch.channels_last), y)
    check(lambda x: torch.full_like(x, 3.0) + x, x)


def test_outputs_that_are_views_of_computed_values_keep_eagers_strides_and_offsets():
    x = torch.randn(6, 4)
    fn = lambda x: ((x * 2)[:, 1:], (x + 1)[:1].expand(3, 4), (x * 3).t().unsqueeze(0), *(x - 1).split(2, -1),  # noqa: E731
                    *(x.exp()).unbind(1), (x * 5).diagonal())
    call = check(fn, x)
    got, want = call([x]), fn(x)
    for g, w in zip(got, want):
        assert g.storage_offset() == w.storage_offset()


def test_eager_strides_reads_dense_layouts_only():
    assert eager_strides((3, 4), torch.empty(4, 3).t()) == (1, 3)
    assert eager_strides((3, 4), torch.empty(3, 4)) == (4, 1)
    assert eager_strides((3,), torch.empty(3, 1)) == (1,)  # a keepdim result
    assert eager_strides((3, 4), torch.empty(3, 8)[:, :4]) is None  # gaps
    assert eager_strides((3, 4), torch.empty(4).expand(3, 4)) is None  # overlaps
    assert eager_strides((3, 4), torch.empty(12)[0:12].view(3, 4)) == (4, 1)
    assert eager_strides((3, 4), torch.empty(13)[1:].view(3, 4)) is None  # an offset


def test_through_dynamo_an_output_can_be_viewed_as_in_eager():
    torch._dynamo.reset()

    def f(x):
        y = x.transpose(1, 2) * 2  # eager: strides of the transposed input
        return y, y.sum(-1)

    x = torch.randn(2, 8, 5)
    got = torch.compile(f, backend="mend")(x)
    want = f(x)
    for g, w in zip(got, want):
        assert_same(g, w)
    # eager's .transpose(1, 2).reshape(...) is a view; on mend's output too
    assert got[0].transpose(1, 2).view(2, 40).data_ptr() == got[0].data_ptr()
    torch._dynamo.reset()


def test_training_forward_outputs_have_the_strides_the_backward_was_compiled_for():
    torch._dynamo.reset()

    def fn(x):
        h = x.permute(0, 2, 1) * 3
        return torch.tanh(h).transpose(1, 2) + h.sum(-1, keepdim=True).transpose(1, 2)

    x = torch.randn(3, 7, 5).permute(0, 2, 1).contiguous().permute(0, 2, 1).requires_grad_()
    out, want, got_grad, want_grad = sum_backward_step(torch.compile(fn, backend="mend"), fn, x)
    assert_same(out, want)
    assert_same(got_grad, want_grad)
    assert same_strides(got_grad, want_grad)
    torch._dynamo.reset()
