"""
CUDA graphs (cuda_graph: auto where they can run, or True): train.py's step and its eval forward recorded once and
replayed, so that a small model's step costs one launch instead of hundreds (results/bench_gpu.md measures it).
"""
import torch


def cuda_graph_refusal(cfg, env):
    """Why this run's step cannot be recorded once and replayed, or None: cuda_graph=True is refused with it before any
    work, and cuda_graph=None (auto) runs eagerly for it, the start line saying why."""
    if env.device_type != 'cuda':
        return f"not a CUDA device (this run is on {env.device})"
    if env.ddp:
        return ("DDP's all-reduce is not captured; graphed runs take one process a GPU (ablate.sh's JOBS runs seeds "
                "side by side)")
    if cfg['optimizer'] != 'adamw':
        return "OrthoAdam's step is not captured (a graph needs AdamW with capturable=True)"
    if env.dtype == 'float16':
        return ("float16's GradScaler cannot be replayed (its overflow check reads the device); dtype=float32, or "
                "bfloat16 on a GPU that has it, can")
    if env.compile and cfg['compile_mode'] in ('reduce-overhead', 'max-autotune'):
        return f"compile_mode={cfg['compile_mode']!r} makes CUDA graphs of its own; use one of the two"
    return None


class CudaGraphs:
    """cuda_graph=True: train.py's step() (forward and backward over the micro-batches, gradient clipping, AdamW) is
    recorded once as a CUDA graph and replayed every step, and so is the eval forward, so a small model's step costs
    one launch instead of hundreds. Each step's batches are copied into fixed input tensors before the replay; the
    learning rate is a tensor that the captured AdamW reads on the device (train.set_lr).
    - The first WARMUP steps run eagerly, on a side stream: AdamW's state, cuBLAS's workspaces and torch.compile
      are set up there, which a capture may not do. Then the step is captured and replayed from there on.
    - Dropout: a replay reads the generator's seed and offset when it starts, so reseeding before each replay keeps
      the masks a pure function of (seed, iteration), across resumes too. Within a step the micro-batches draw
      consecutive offsets of one seed, so with accumulation and dropout the masks are not the eager step's.
    - Gradients live in the graph's memory: the captured backward of the first micro-batch writes them, the others
      add to them; step()'s zero_grad(set_to_none=True) drops only Python's references, at capture time."""
    WARMUP = 3

    def __init__(self, cfg, env):
        shape = (env.accum, cfg['batch_size'], cfg['block_size'])
        self.X = torch.zeros(shape, dtype=torch.long, device=env.device)
        self.Y = torch.zeros_like(self.X)
        self.eval_X = self.eval_Y = None  # one group of eval batches (dataset.eval_batches), shaped at the first eval
        self.train_graph = self.eval_graph = None
        self.eager_steps = 0

    def step(self, run, batches, reseed):
        """run(micro-batches) on this step's batches, copied into the graph's fixed inputs: eagerly for the first
        WARMUP steps, then recorded once and replayed. reseed() sets the dropout generator for the step."""
        for m, (X, Y) in enumerate(batches):
            self.X[m].copy_(X, non_blocking=True)
            self.Y[m].copy_(Y, non_blocking=True)
        fixed = list(zip(self.X, self.Y))
        if self.train_graph is None and self.eager_steps < self.WARMUP:
            reseed()
            self.eager_steps += 1
            return self._on_side_stream(lambda: run(fixed))
        if self.train_graph is None:
            self.train_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.train_graph):
                self.train_loss = run(fixed)
        reseed()  # after the capture, which advances the generator
        self.train_graph.replay()
        return self.train_loss.clone()  # the graph overwrites its output at the next replay

    def eval_loss(self, forward, X, Y):
        """forward(X, Y) (train.batch_losses: each batch's loss) through its capture, on this group of eval batches
        copied into the graph's fixed inputs: captured at the first call, after one eager forward on a side stream.
        Every group has the same shape (dataset.eval_batches), so one capture serves them all."""
        if self.eval_graph is None:
            self.eval_X, self.eval_Y = torch.zeros_like(X), torch.zeros_like(Y)
        self.eval_X.copy_(X, non_blocking=True)
        self.eval_Y.copy_(Y, non_blocking=True)
        if self.eval_graph is None:
            self._on_side_stream(lambda: forward(self.eval_X, self.eval_Y))
            self.eval_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.eval_graph):
                self.eval_out = forward(self.eval_X, self.eval_Y)
        self.eval_graph.replay()
        return self.eval_out.clone()

    @staticmethod
    def _on_side_stream(fn):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = fn()
        torch.cuda.current_stream().wait_stream(side)
        return out
