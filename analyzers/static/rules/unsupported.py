"""MND5xx: calls and statements Dynamo does not support (the frame skips are in ``frame_skips``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.rules.base import Finding, FixInfo, Rule, checker, project_checker, register
from mend.analyzers.static.rules.context import Context, ProjectContext
from mend.analyzers.static.summary import FileSummary, FuncInfo
from mend.analyzers.static.torch_facts import RNN_FLAG

_HDR = "import torch\nfrom torch import nn\n"

register(
    Rule(
        "MND501", "backward-in-compiled-code",
        "`.backward()`/`torch.autograd.grad` in compiled code: Dynamo does not trace autograd calls by default "
        "and breaks the graph",
        ("GB0123", "GB9186"), "break",
        what="Finds `loss.backward()`, `torch.autograd.grad(...)` and `torch.autograd.backward(...)` in traced code.",
        why="""
            With `trace_autograd_ops=False` (the default) Dynamo breaks at the call (GB0123, GB9186);
            the backward then runs eagerly, outside the compiled graph.
        """,
        use_instead="""
            Compile the forward and loss, call `.backward()` outside the compiled function (the
            compiled graph still gets a compiled backward through AOTAutograd).
        """,
        invalid=(_HDR + """
            @torch.compile
            def train_step(model, x, y):
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                return loss
        """,),
        valid=(_HDR + """
            @torch.compile
            def loss_fn(model, x, y):
                return nn.functional.mse_loss(model(x), y)

            def train_step(model, x, y):
                loss = loss_fn(model, x, y)
                loss.backward()
                return loss
        """,),
    ),
    Rule(
        "MND502", "module-or-parameter-construction-in-forward",
        "`nn.Parameter`/parametrized module constructed in compiled code: Dynamo cannot create parameters "
        "in a graph and breaks",
        ("GB0264",), "break",
        what="""
            Finds `nn.Parameter(...)` and constructors of modules that own parameters (`nn.Linear`,
            `nn.Conv2d`, `nn.LayerNorm`, `nn.Embedding`, ...) in traced code. Parameter-free modules
            (`nn.ReLU()`, `nn.Dropout()`) are traced and not reported. Also a new leaf tensor that requires
            grad: a factory (`torch.tensor`, `torch.zeros`, `torch.ones`, `torch.full`, `torch.empty`,
            `torch.rand*`, ...) with `requires_grad=` anything but `False` (`requires_grad=self.training`
            breaks in training).
        """,
        why="""
            Parameters must exist before tracing: Dynamo breaks at the constructor (GB0264), and at a
            factory asked for a tensor that requires grad ("tensor creation function with
            requires_grad=True").
        """,
        use_instead="Create modules and parameters in `__init__` and use them in `forward`.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    proj = nn.Linear(x.shape[-1], 8)
                    return proj(x)
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(16, 8)

                def forward(self, x):
                    return nn.ReLU()(self.proj(x))
        """,),
    ),
    Rule(
        "MND503", "data-ptr-or-id-arithmetic",
        "arithmetic on `data_ptr()`/`id()` in compiled code: Dynamo models these values wrongly, raises, and "
        "skips the whole frame",
        ("GB0088",), "break",
        what="Finds arithmetic on `t.data_ptr()` or `id(obj)` values (directly or through a local) in traced code.",
        why="""
            Dynamo does not model these integers faithfully: the arithmetic raises inside the tracer
            ("Observed exception", GB0088) and the whole function falls back to eager, although the
            code runs fine without compile.
        """,
        use_instead="Compute pointer arithmetic outside the compiled function, or in a `@torch.compiler.disable` "
                    "helper (one graceful break instead of a frame skip).",
        invalid=(_HDR + """
            @torch.compile
            def f(x, y):
                offset = y.data_ptr() - x.data_ptr()
                return x + offset
        """,),
        valid=(_HDR + """
            @torch.compile
            def f(x, y):
                same = x.data_ptr()
                return x + y
        """,),
    ),
    Rule(
        "MND504", "call-to-compiler-disabled-function",
        "call to a `@torch.compiler.disable` function from compiled code: Dynamo skips the call and breaks the "
        "graph",
        ("GB0098",), "break",
        what="Finds calls from traced code to functions decorated with `@torch.compiler.disable` "
             "(or `@torch._dynamo.disable`) defined in the checked tree.",
        why="A disabled function always runs eagerly: the graph ends before the call and restarts after it "
            "(GB0098). That is often the intent; the finding makes the cost visible.",
        use_instead="Keep disabled helpers out of hot paths, or make their body traceable and drop the decorator.",
        invalid=(_HDR + """
            @torch.compiler.disable
            def log_stats(x):
                print(x.mean())

            class M(nn.Module):
                def forward(self, x):
                    log_stats(x)
                    return x.relu()
        """,),
        valid=(_HDR + """
            def scale(x):
                return x * 2

            class M(nn.Module):
                def forward(self, x):
                    return scale(x).relu()
        """,),
    ),
    Rule(
        "MND507", "unsupported-context-manager",
        "unsupported context manager in compiled code: Dynamo cannot enter it and breaks the graph",
        ("GB0142",), "break",
        what="Finds `with` statements on `threading` locks and on `open(...)` in traced code.",
        why="""
            Dynamo only knows a fixed set of context managers (grad mode, autocast, ...). Entering a
            lock skips the whole frame; `with open(...)` breaks twice (GB0059 and GB0142).
        """,
        use_instead="Take locks and open files outside the compiled function.",
        invalid=("import threading\n" + _HDR + """
            lock = threading.Lock()

            class M(nn.Module):
                def forward(self, x):
                    with lock:
                        y = x.relu()
                    return y
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    with torch.no_grad():
                        y = x.relu()
                    return y
        """,),
    ),
    Rule(
        "MND509", "explicit-graph-break",
        "explicit `torch._dynamo.graph_break()`: the graph breaks here on purpose",
        ("GB0025",), "break",
        what="Finds `torch._dynamo.graph_break()` calls in traced code.",
        why="A user-inserted graph break (GB0025) splits the graph; usually left over from debugging.",
        use_instead="Remove the call.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    torch._dynamo.graph_break()
                    return x.relu()
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    return x.relu()
        """,),
    ),
    Rule(
        "MND510", "untraceable-builtin-call",
        "call to an untraceable builtin in compiled code: Dynamo skips C functions it does not know and breaks "
        "the graph",
        ("GB0007",), "break",
        what="""
            Finds calls to C functions Dynamo marks as skipped: `os.getpid`, `os.getppid`, `os.urandom`,
            `sys._getframe`, `inspect.stack`/`currentframe`, `zlib.*`, `torch.manual_seed`,
            `torch.get_rng_state`/`torch.set_rng_state` (reversible layers save the generator's state to
            replay dropout in their backward).
        """,
        why="Dynamo cannot trace into C extensions and builtins it has no rule for: the graph breaks (GB0007).",
        use_instead="Compute the value outside the compiled function and pass it in.",
        invalid=("import os\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    pid = os.getpid()
                    return x + pid
        """,),
        valid=("import os\n" + _HDR + """
            PID = os.getpid()

            class M(nn.Module):
                def forward(self, x):
                    return x + PID
        """,),
    ),
)

register(
    Rule(
        "MND512", "recurrent-module-call",
        "call of an `nn.LSTM`/`nn.GRU`/`nn.RNN` submodule in compiled code: Dynamo does not wrap recurrent "
        "modules by default and breaks the graph",
        ("GB0014",), "break",
        what="""
            Finds calls of a submodule the class assigned an `nn.LSTM`, `nn.GRU` or `nn.RNN` (`self.lstm(x)`)
            in traced code, unless the file sets `torch._dynamo.config.allow_rnn`.
        """,
        why="""
            Dynamo refuses to wrap recurrent modules unless `torch._dynamo.config.allow_rnn` is on
            (GB0014, "experimental support"): the graph ends before the call and the recurrent layer
            runs eagerly. The flag is global, and `torch._dynamo.patch_dynamo_config` refuses it.
        """,
        use_instead="""
            Compile the layers before and after the recurrent module as separate functions, or set
            `torch._dynamo.config.allow_rnn = True` for the program.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lstm = nn.LSTM(8, 8)

                def forward(self, x):
                    return self.lstm(x)[0] + x
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv1d(8, 8, 1)

                def forward(self, x):
                    return self.conv(x) + x
        """,),
        fix=FixInfo(
            "always", "unsafe", "allow the recurrent module for this call only: _mend_rnn(lambda: self.lstm(x))",
            "`self.lstm(x)` becomes `_mend_rnn(lambda: self.lstm(x))`, a helper function (**unsafe**). "
            "Eager calls the module and nothing else. Under compile a function Dynamo runs while tracing "
            "(`assume_constant_result`) turns `allow_rnn` on for the call and back off after it, so the "
            "recurrent layer is traced into the graph; the global setting is the same before and after. "
            "Dynamo's support is experimental and the traced layer is not bitwise the eager one (measured on "
            "the CPU, torch 2.13: within 3e-8 in float32), hence unsafe.",
            strategies=("rnn_lambda",),
        ),
    ),
    Rule(
        "MND513", "sparse-tensor-in-compiled-code",
        "sparse tensor in compiled code: torch.compile does not support sparse tensors and breaks the graph",
        ("GB0007",), "break",
        what="""
            Finds sparse tensors made or used in traced code: `torch.sparse_coo_tensor` and the other
            sparse constructors, `torch.spmm`/`smm`/`hspmm`/`sspaddmm`, `torch.sparse.*` (`torch.sparse.mm`,
            `torch.sparse.sum`, ...) and `x.to_sparse()` (and its CSR/CSC/BSR/BSC forms).
        """,
        why="""
            Dynamo neither creates sparse tensors in a graph (the constructors are skipped functions,
            GB0007, or "Sparse tensor creation not supported") nor wraps one it is given ("Attempted to wrap
            sparse Tensor"): the graph breaks at each, and code that multiplies by a sparse adjacency matrix
            (graph networks) runs eagerly from there.
        """,
        use_instead="""
            Keep the sparse product outside the compiled region, or use a dense or index-based form
            (`index_add_`, `scatter_add_`, a gather of the neighbours) that traces.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, indices, values):
                    adj = torch.sparse_coo_tensor(indices, values, (x.shape[0], x.shape[0]))
                    return torch.spmm(adj, x)
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, src, dst, values):
                    out = torch.zeros_like(x)
                    return out.index_add_(0, dst, x[src] * values[:, None])
        """,),
    ),
)

PARAM_MODULES = frozenset(
    "Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d Embedding "
    "EmbeddingBag LayerNorm GroupNorm RMSNorm BatchNorm1d BatchNorm2d BatchNorm3d InstanceNorm1d InstanceNorm2d "
    "InstanceNorm3d MultiheadAttention LSTM GRU RNN LSTMCell GRUCell RNNCell PReLU Transformer "
    "TransformerEncoderLayer TransformerDecoderLayer".split()
)
UNTRACEABLE = frozenset({
    "os.getpid", "os.getppid", "os.urandom", "sys._getframe", "inspect.stack", "inspect.currentframe",
    "inspect.getouterframes", "inspect.trace", "torch.manual_seed", "torch.random.manual_seed",
    "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.get_rng_state", "torch.set_rng_state",
    "torch.random.get_rng_state", "torch.random.set_rng_state",
})


GRAD_FACTORIES = frozenset(f"torch.{n}" for n in (
    "tensor as_tensor zeros ones full empty rand randn randint arange linspace logspace eye zeros_like ones_like "
    "full_like empty_like rand_like randn_like".split()))
SPARSE_CALLS = frozenset({
    "torch.sparse_coo_tensor", "torch.sparse_csr_tensor", "torch.sparse_csc_tensor", "torch.sparse_bsr_tensor",
    "torch.sparse_bsc_tensor", "torch.sparse_compressed_tensor", "torch.spmm", "torch.smm", "torch.hspmm",
    "torch.sspaddmm",
})
SPARSE_METHODS = frozenset({"to_sparse", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc",
                            "to_sparse_coo"})

AUTOGRAD_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})
TRACE_AUTOGRAD = "trace_autograd_ops"  # Dynamo config flag under which autograd calls are traced


@checker("call")
def unsupported_calls(ctx: Context, call: ast.Call) -> None:
    f = call.func
    q = ctx.qualify(f)
    if q is not None:
        if q in AUTOGRAD_CALLS:
            if TRACE_AUTOGRAD not in ctx.config_flags:
                ctx.report("MND501", call, f"`{q}` in compiled code: Dynamo does not trace autograd calls by "
                                           "default and breaks the graph")
        elif q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            ctx.report("MND502", call, "`nn.Parameter(...)` constructed in compiled code: Dynamo cannot create "
                                       "parameters in a graph and breaks")
        elif q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] in PARAM_MODULES:
            ctx.report("MND502", call, f"`{q}(...)` constructed in compiled code: its parameters cannot be created "
                                       "in a graph and Dynamo breaks")
        elif q in GRAD_FACTORIES and (flag := _requires_grad(call)) is not None:
            message = (f"`{q}(..., requires_grad=...)` in compiled code: Dynamo cannot create a leaf tensor that "
                       "requires grad in a graph and breaks")
            if flag == "self.training":  # breaks in training only, like a test behind `self.training`
                ctx.report("MND502", call, f"{message} (only when `self.training`)", mode="self.training")
            else:
                ctx.report("MND502", call, message if flag == "True" else f"{message} (when `{flag}` is true)")
        elif q in SPARSE_CALLS or q.startswith("torch.sparse."):
            ctx.report("MND513", call, f"`{q}` in compiled code: torch.compile does not support sparse tensors and "
                                       "breaks the graph")
        elif q == "torch._dynamo.graph_break":
            ctx.report("MND509", call)
        elif q in UNTRACEABLE or q.startswith("zlib."):
            ctx.report("MND510", call, f"`{q}()` in compiled code: Dynamo cannot trace this C function and breaks "
                                       "the graph")
    elif isinstance(f, ast.Attribute) and f.attr == "backward" and ctx.kind(f.value) in (tk.T, tk.M):
        if TRACE_AUTOGRAD not in ctx.config_flags:
            ctx.report("MND501", call)
    elif isinstance(f, ast.Attribute) and f.attr in SPARSE_METHODS and ctx.kind(f.value) in (tk.T, tk.M):
        ctx.report("MND513", call, f"`.{f.attr}()` in compiled code: torch.compile does not support sparse tensors "
                                   "and breaks the graph")


def _requires_grad(call: ast.Call) -> str | None:
    """The source of ``requires_grad=`` when given and not the literal False, else None."""
    for k in call.keywords:
        if k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant) and k.value.value is False):
            return ast.unparse(k.value)
    return None


@checker("call")
def recurrent_module_call(ctx: Context, call: ast.Call) -> None:
    attr = ctx.is_self_attr(call.func)
    if attr and ctx.facts and attr in ctx.facts.rnn_attrs and RNN_FLAG not in ctx.config_flags:
        ctx.report("MND512", call, f"`self.{attr}(...)` (an `nn.LSTM`/`GRU`/`RNN`) in compiled code: Dynamo "
                                   "does not wrap recurrent modules by default and breaks the graph")


@checker("binop")
def pointer_arithmetic(ctx: Context, node: ast.BinOp) -> None:
    for side in (node.left, node.right):
        if isinstance(side, ast.Name) and side.id in ctx.ptr_names:
            break
        if isinstance(side, ast.Call):
            f = side.func
            if (isinstance(f, ast.Attribute) and f.attr == "data_ptr") or ctx.qualify(f) == "builtins.id":
                break
    else:
        return
    ctx.report("MND503", node)


@checker("with")
def unsupported_with(ctx: Context, node: ast.With) -> None:
    for item in node.items:
        expr = item.context_expr
        if isinstance(expr, ast.Call) and ctx.qualify(expr.func) == "builtins.open":
            ctx.report("MND507", expr, "`with open(...)` in compiled code: Dynamo cannot trace file I/O or enter "
                                       "the file's context manager, and breaks the graph")
        elif ctx.is_lock(expr):
            ctx.report("MND507", expr, "`with <threading lock>` in compiled code: Dynamo cannot enter a lock and "
                                       "skips the whole frame")


@project_checker
def disabled_function_calls(project: ProjectContext, summary: FileSummary, fn: FuncInfo) -> Iterator[Finding]:
    """MND504: calls from a traced function to ``@torch.compiler.disable`` functions of the tree."""
    for site, target in project.disabled_calls(summary, fn):
        yield Finding(
            "MND504", f"call to `{target.name}`, decorated with torch.compiler.disable, from compiled code: "
                      "Dynamo skips the call and breaks the graph",
            site.line, site.col, site.end_line, site.end_col, fn.id)
