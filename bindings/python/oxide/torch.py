"""Oxide kernels as PyTorch operators (import oxide.torch; needs torch).

    import oxide, oxide.torch, torch

    mod = oxide.compile(SOURCE, "cuda")
    scaled_add = oxide.torch.custom_op(
        "mylib::scaled_add", mod.scaled_add,       # fn scaled_add(x, y, out, alpha)
        outputs={"out": lambda x, y, alpha: torch.empty_like(x)},
        grid=lambda x, y, alpha, out: (triton_style_cdiv(x.numel(), 256),), block=256)

    z = scaled_add(x, y, 2.0)                   # torch.ops.mylib.scaled_add
    f = torch.compile(model)                    # calls it without a graph break

`custom_op` defines a torch.library operator whose schema comes from the
kernel's parameters: every parameter not named in `outputs` is an input
(tensor parameters become `Tensor`, float scalars `float`, integer scalars
`int`, bool `bool`), and the outputs are returned, in the order given. Each
output's function allocates it from the inputs; it is also the operator's
shape function (its "fake" implementation): torch.empty_like and friends
give fake tensors when torch.compile traces, real ones when the operator
runs. The kernel then runs on PyTorch's current stream (the launch rule of
oxide: docs/python.md, "Streams"), so the operator is ordered like any
torch operation, in eager mode, under torch.compile, and inside CUDA graph
capture (mode="reduce-overhead").

A kernel belongs to one device: pass one per device type (kernels=[cpu_k,
cuda_k]) to register the operator for both.

Autograd: `backward=` registers the operator's backward (torch.library.
register_autograd), so that torch.autograd, torch.compile and torch.func
differentiate through it. It is called as backward(ctx, *grads), one grad per
output, and returns one gradient per input (None for those that have none),
computed with Oxide operators, torch code or both. By default the context
holds the inputs and outputs (`oxide.torch.saved(ctx)` gives them back);
`setup_context=` replaces that. An operator registered without a backward
raises when a gradient flows through it, rather than leaving `.grad` None:

    gelu = oxide.torch.custom_op("mylib::gelu", mod.gelu, outputs=...,
                                 backward=lambda ctx, g: gelu_grad(oxide.torch.saved(ctx)[0][0], g))
"""
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

_SCALAR_TYPES = {"bool": "bool", "f16": "float", "bf16": "float", "f32": "float", "f64": "float"}

# qualified name -> the torch.library.Library that holds the definition (kept
# for the life of the process: dropping a Library removes its operators)
_LIBRARIES: Dict[str, Any] = {}


def _schema_type(p) -> str:
    if p.kind != "scalar":
        return "Tensor"
    return _SCALAR_TYPES.get(p.dtype, "int")


def _setup_context(ctx: Any, inputs: Sequence[Any], output: Any) -> None:
    """The default context: every tensor input and output saved (through
    save_for_backward, which torch.compile and torch.func follow), the other
    inputs kept as they are; saved(ctx) puts them back in order."""
    outs = output if isinstance(output, tuple) else (output,)
    ctx.oxide_inputs = [None if isinstance(v, torch.Tensor) else v for v in inputs]
    ctx.oxide_tensor = [isinstance(v, torch.Tensor) for v in inputs]
    ctx.save_for_backward(*(v for v in inputs if isinstance(v, torch.Tensor)), *outs)


def saved(ctx: Any) -> Tuple[List[Any], List[torch.Tensor]]:
    """(inputs, outputs) of the call whose backward runs, in the operator's
    order, from the default context of custom_op."""
    tensors = list(ctx.saved_tensors)
    n = sum(ctx.oxide_tensor)
    it = iter(tensors[:n])
    inputs = [next(it) if t else v for v, t in zip(ctx.oxide_inputs, ctx.oxide_tensor)]
    return inputs, tensors[n:]


def custom_op(qualname: str, kernels: Any, *, outputs: Dict[str, Callable[..., torch.Tensor]],
              grid: Union[None, int, Sequence[int], Callable[..., Any]] = None,
              block: Union[None, int, Sequence[int], Callable[..., Any]] = None,
              tile: Optional[Dict[str, Any]] = None,
              backward: Optional[Callable[..., Any]] = None,
              setup_context: Optional[Callable[..., Any]] = None):
    """Registers Oxide kernel(s) as the torch operator `qualname`
    ("namespace::name") and returns it (torch.ops.namespace.name).

    kernels: an oxide.Kernel, or a list of them for different device types
    (at most one per type). outputs: {parameter name: function of the
    inputs (in parameter order) returning the empty output tensor}; the
    operator returns them in this order. grid, block: for a #[kernel]
    (SIMT) kernel, ints or tuples, or functions of all the kernel's
    arguments in parameter order (inputs and outputs). tile: for a #[tile]
    kernel, {output name: the partition tile shape, or a function of all the
    arguments giving it}: those outputs are passed as out.partition(tile).
    backward, setup_context: the operator's autograd (see the module's
    docstring); without backward, a gradient through the operator raises.
    Tensor inputs of a #[kernel] (SIMT) kernel, which takes contiguous
    slices, are made contiguous first (x.T is taken as its values)."""
    import oxide

    ks = list(kernels) if isinstance(kernels, (list, tuple)) else [kernels]
    if not ks or not all(isinstance(k, oxide.Kernel) for k in ks):
        raise TypeError("kernels must be an oxide.Kernel or a list of them")
    if "::" not in qualname:
        raise ValueError(f"qualname must be 'namespace::name', got {qualname!r}")
    ns, name = qualname.split("::", 1)
    params = ks[0].params
    for k in ks[1:]:
        if [(p.name, p.kind, p.dtype) for p in k.params] != \
                [(p.name, p.kind, p.dtype) for p in params]:
            raise ValueError(f"kernels '{ks[0].name}' and '{k.name}' have different parameters")
    by_type: Dict[str, Any] = {}
    for k in ks:
        t = k.module.device.type
        if t in by_type:
            raise ValueError(f"two kernels for device type {t!r}")
        by_type[t] = k
    names = [p.name for p in params]
    unknown = [o for o in outputs if o not in names]
    if unknown:
        raise ValueError(f"outputs {unknown} are not parameters of kernel '{ks[0].name}' "
                         f"({', '.join(names)})")
    tile = dict(tile or {})
    for o, p in ((o, params[names.index(o)]) for o in outputs):
        if p.kind == "scalar" or not p.writable:
            raise ValueError(f"output '{o}' is not a parameter the kernel writes ({p.kind})")
        if p.kind == "tile" and o not in tile:
            raise ValueError(f"output '{o}' is a #[tile] output partition: give its tile shape "
                             f"in tile={{'{o}': ...}}")
    inputs = [p for p in params if p.name not in outputs]
    out_names = list(outputs)
    args = ", ".join(f"{_schema_type(p)} {p.name}" for p in inputs)
    ret = "Tensor" if len(out_names) == 1 else "(" + ", ".join(["Tensor"] * len(out_names)) + ")"

    def contiguous(values):
        # a SIMT kernel's slices are contiguous: strided tensors go in as contiguous copies
        return [v.contiguous() if isinstance(v, torch.Tensor) and p.kind != "tensor" else v
                for v, p in zip(values, inputs)]

    def allocate(values):
        return [outputs[o](*values) for o in out_names]

    def resolve(v, full):
        return v(*full) if callable(v) else v

    def impl(*values):
        dev = next((v.device for v in values if isinstance(v, torch.Tensor)), None)
        k = by_type.get(dev.type if dev is not None else "cpu")
        if k is None:
            raise RuntimeError(f"{qualname}: no Oxide kernel for device type "
                               f"{dev.type if dev is not None else 'cpu'!r} (registered: "
                               f"{sorted(by_type)})")
        values = contiguous(values)
        outs = allocate(values)
        given = dict(zip((p.name for p in inputs), values))
        given.update(zip(out_names, outs))
        full = [given[n] for n in names]
        call = list(full)
        # imported on the stream the kernel will run on (torch's current one),
        # so that nothing touches another stream (illegal inside a capture)
        s = oxide.wrap_stream(torch.cuda.current_stream(dev), k.module.device) \
            if dev is not None and dev.type == "cuda" else None
        for o, shape in tile.items():
            i = names.index(o)
            call[i] = oxide.from_dlpack(full[i], stream=s).partition(resolve(shape, full))
        kw = {}
        if grid is not None:
            kw["grid"] = resolve(grid, full)
        if block is not None:
            kw["block"] = resolve(block, full)
        k(*call, **kw)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def fake(*values):
        outs = allocate(contiguous(values))
        return outs[0] if len(outs) == 1 else tuple(outs)

    lib = torch.library.Library(ns, "FRAGMENT")
    lib.define(f"{name}({args}) -> {ret}")
    for t in by_type:
        lib.impl(name, impl, "CUDA" if t == "cuda" else "CPU")
    torch.library.register_fake(qualname, fake, lib=lib)
    if backward is None:
        if setup_context is not None:
            raise ValueError("setup_context= goes with backward=")

        def backward(ctx, *grads):
            raise RuntimeError(f"{qualname} has no backward: a gradient flows through it. Register one with "
                               f"oxide.torch.custom_op(..., backward=fn), fn(ctx, *grads) giving a gradient "
                               f"per input")
    torch.library.register_autograd(qualname, backward, setup_context=setup_context or _setup_context, lib=lib)
    _LIBRARIES[qualname] = lib
    return getattr(getattr(torch.ops, ns), name)
