"""An Oxide kernel inside a torch model: a residual block whose activation
is an Oxide kernel (y = max(x, 0) + alpha * x, "leaky ReLU"). The model runs
on a non-default torch stream (the kernel follows torch's current stream:
no stream= needed, no synchronization added) and then inside a captured CUDA
graph, replayed with new inputs. Checked against the same model in plain
torch. On the CPU (no GPU) the eager part runs; the stream and graph parts
need CUDA and say so."""
import torch

import oxide
from _common import finish, pick_device

SRC = """
#[kernel]
fn leaky(x: &[f32], y: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) {
        let v = x[i];
        *o = if v > 0.0 { v } else { alpha * v };
    }
}
"""
where, dev = pick_device()
leaky = oxide.compile(SRC, dev).leaky


class Block(torch.nn.Module):
    def __init__(self, width, oxide_act):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.oxide_act = oxide_act

    def forward(self, x):
        h = self.lin(x)
        if self.oxide_act:
            out = torch.empty_like(h)
            leaky(h, out, 0.1, grid=(h.numel() + 255) // 256, block=256)
            h = out
        else:
            h = torch.nn.functional.leaky_relu(h, 0.1)
        return x + h


torch.manual_seed(0)
ox = Block(512, True).to(where)
ref = Block(512, False).to(where)
ref.load_state_dict(ox.state_dict())
ok, notes = True, []
with torch.no_grad():
    x = torch.randn(256, 512, device=where)
    ok &= torch.allclose(ox(x), ref(x), rtol=1e-5, atol=1e-5)
    notes.append("eager")
    if where == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the whole model on a side stream
            outs = [ox(x * i) for i in range(10)]
        torch.cuda.current_stream().wait_stream(side)
        ok &= all(torch.allclose(o, ref(x * i), rtol=1e-5, atol=1e-5) for i, o in enumerate(outs))
        notes.append("side stream")
        static_x = torch.randn(256, 512, device="cuda")
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            ox(static_x)
        torch.cuda.current_stream().wait_stream(warm)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = ox(static_x)
        for _ in range(5):
            new = torch.randn(256, 512, device="cuda")
            static_x.copy_(new)
            graph.replay()
            ok &= torch.allclose(static_y, ref(new), rtol=1e-5, atol=1e-5)
        notes.append("CUDA graph")
    else:
        notes.append("side stream and CUDA graph need a GPU: not run")
finish("model_streams_graph", bool(ok), ", ".join(notes) + f" on {dev}")
