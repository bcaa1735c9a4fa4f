"""Tensor parallelism on dtorch against torch: pytorch/examples' TP MLP
(ColwiseParallel in_proj, RowwiseParallel out_proj) on a 1-d mesh of 4
and on a 2-d dp x tp mesh, its sequence-parallel variant, a
sequence-parallel block (SequenceParallel LayerNorm, PrepareModuleInput,
Colwise / Rowwise), embeddings, loss_parallel. Outputs and gradients equal
the same module unsharded in real torch; CommDebugMode's counts equal
torch's own CommDebugMode on the same plan (torch run on a one-process
fake group, which counts collectives without moving data)."""
import pytest
import torch

import dtorch
import dtorch.nn as dnn
import dtorch.nn.functional as dF
from dtorch.distributed.device_mesh import init_device_mesh
from dtorch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from dtorch.distributed.tensor.debug import CommDebugMode
from dtorch.distributed.tensor.parallel import ColwiseParallel, PrepareModuleInput, \
    PrepareModuleOutput, RowwiseParallel, SequenceParallel, loss_parallel, \
    parallelize_module

N = dtorch._lib.dt_runtime_num_ranks(dtorch._lib.dt_runtime_default())
pytestmark = pytest.mark.skipif(N < 8, reason=f"needs 8 ranks (the runtime has {N})")
TOL = dict(rtol=1e-5, atol=1e-5)


# ---- the models, written once for torch.nn and dtorch.nn
def toy_model(nn):
    """pytorch/examples distributed/tensor_parallelism's ToyModel."""
    class ToyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(10, 32)
            self.relu = nn.ReLU()
            self.out_proj = nn.Linear(32, 5)

        def forward(self, x):
            return self.out_proj(self.relu(self.in_proj(x)))
    return ToyModel()


def sp_block(nn):
    """A sequence-parallel transformer MLP block: x + mlp(norm(x))."""
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(16, 32)
            self.w2 = nn.Linear(32, 16)

        def forward(self, x):
            return self.w2(self.w1(x).relu())

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(16)
            self.mlp = MLP()

        def forward(self, x):
            return x + self.mlp(self.norm(x))
    return Block()


SP_PLAN = lambda: {"norm": SequenceParallel(),  # noqa: E731
                   "mlp": PrepareModuleInput(input_layouts=(Shard(1),),
                                             desired_input_layouts=(Replicate(),)),
                   "mlp.w1": ColwiseParallel(),
                   "mlp.w2": RowwiseParallel(output_layouts=Shard(1))}


def torch_copy(model, make):
    """The torch twin of a dtorch model: same class, same weights."""
    ref = make(torch.nn)
    ref.load_state_dict({k: v.to_torch() for k, v in model.state_dict().items()})
    return ref


def grads_equal(model, ref):
    got = dict(model.named_parameters())
    for name, p in ref.named_parameters():
        g = got[name].grad
        assert g is not None, name
        torch.testing.assert_close(g.to_torch(), p.grad, **TOL, msg=name)


# ---- torch's own counts, on a fake process group
@pytest.fixture(scope="module")
def torch_tp():
    import torch.distributed as tdist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not tdist.is_initialized():
        tdist.init_process_group("fake", store=FakeStore(), rank=0, world_size=N)
    import torch.distributed.tensor.parallel as tp
    from torch.distributed.device_mesh import DeviceMesh
    return tp, DeviceMesh


def torch_counts(torch_tp, make, plan_fn, inp_fn, mesh_ranks=(0, 1, 2, 3), loss_fn=None):
    """{name: count} torch's CommDebugMode reports for forward and for
    backward of the model under plan."""
    tp, DeviceMesh = torch_tp
    from torch.distributed.tensor.debug import CommDebugMode as TorchComm
    tmesh = DeviceMesh("cpu", list(mesh_ranks))
    model = tp.parallelize_module(make(torch.nn), tmesh, plan_fn(tp))
    out = []
    with TorchComm() as c:
        y = model(inp_fn(tmesh))
        loss = loss_fn(y) if loss_fn else y.sum()
    out.append(c)
    with TorchComm() as c:
        loss.backward()
    out.append(c)
    return [{op_name(k): v for k, v in c.get_comm_counts().items() if v} for c in out]


def op_name(key):
    return key if isinstance(key, str) else key._qualified_op_name.replace("::", ".")


def dtorch_counts(c):
    return {op_name(k): v for k, v in c.get_comm_counts().items() if v}


def torch_plan(tp, plan):
    """The same plan with torch's styles and placements."""
    from torch.distributed.tensor import Replicate as TR, Shard as TS

    def conv(p):
        if p is None:
            return None
        return TS(p.dim) if p.is_shard() else TR()

    def style(s):
        if isinstance(s, ColwiseParallel) and not isinstance(s, RowwiseParallel):
            return tp.ColwiseParallel(input_layouts=conv(s.input_layouts[0]),
                                      output_layouts=conv(s.output_layouts[0]),
                                      use_local_output=s.use_local_output)
        if isinstance(s, RowwiseParallel):
            return tp.RowwiseParallel(input_layouts=conv(s.input_layouts[0]),
                                      output_layouts=conv(s.output_layouts[0]),
                                      use_local_output=s.use_local_output)
        if isinstance(s, SequenceParallel):
            return tp.SequenceParallel(sequence_dim=s.sequence_sharding[0].dim)
        if isinstance(s, PrepareModuleInput):
            return tp.PrepareModuleInput(
                input_layouts=tuple(conv(p) for p in s.input_layouts),
                desired_input_layouts=tuple(conv(p) for p in s.desired_input_layouts))
        raise AssertionError(s)
    return {k: style(v) for k, v in plan.items()}


# ---- the pytorch/examples TP MLP
def test_tp_mlp_matches_torch_on_a_mesh_of_4(torch_tp):
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(0)
    model = toy_model(dnn)
    ref = torch_copy(model, toy_model)
    plan = {"in_proj": ColwiseParallel(), "out_proj": RowwiseParallel()}
    tp_model = parallelize_module(model, mesh, plan)
    assert tp_model is model
    assert model.in_proj.weight.placements == (Shard(0),)
    assert model.in_proj.bias.placements == (Shard(0),)
    assert model.out_proj.weight.placements == (Shard(1),)
    assert model.out_proj.bias.placements == (Replicate(),)
    assert isinstance(model.in_proj.weight, dnn.Parameter)
    ref_placements = [(n, p.placements) for n, p in model.named_parameters()]
    # the example's training loop: AdamW(lr=0.25, foreach=True)
    opt = dtorch.optim.AdamW(tp_model.parameters(), lr=0.25, foreach=True)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.25, foreach=True)
    torch.manual_seed(1)
    for step in range(3):
        inp = torch.rand(20, 10)
        with CommDebugMode() as fwd:
            out = tp_model(inp)
        want = ref(inp)
        assert isinstance(out, DTensor) and out.placements == (Replicate(),)
        torch.testing.assert_close(out.full_tensor(), want, **TOL)
        with CommDebugMode() as bwd:
            out.sum().backward()
        want.sum().backward()
        grads_equal(model, ref)
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
    for name, p in ref.named_parameters():
        torch.testing.assert_close(dict(model.named_parameters())[name].full_tensor(),
                                   p.detach(), **TOL, msg=name)
        assert dict(model.named_parameters())[name].placements == \
            dict(ref_placements)[name]
    tf, tb = torch_counts(torch_tp, toy_model,
                          lambda tp: torch_plan(tp, plan), lambda m: torch.rand(20, 10))
    assert tf == {"c10d_functional.all_reduce": 1}  # what torch reports
    assert dtorch_counts(fwd) == tf
    assert dtorch_counts(bwd) == tb


def test_tp_mlp_on_the_tp_submesh_of_a_2d_mesh():
    """torch's way: parallelize on mesh_2d["tp"] (the current rank's tp
    group, ranks 0-3)."""
    mesh2 = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    tp_mesh = mesh2["tp"]
    assert tp_mesh.mesh.tolist() == [0, 1, 2, 3]
    dtorch.manual_seed(2)
    model = toy_model(dnn)
    ref = torch_copy(model, toy_model)
    parallelize_module(model, tp_mesh, {"in_proj": ColwiseParallel(),
                                        "out_proj": RowwiseParallel()})
    assert model.in_proj.weight.device_mesh is tp_mesh
    inp = torch.rand(20, 10)
    out = model(inp)
    want = ref(inp)
    torch.testing.assert_close(out.full_tensor(), want, **TOL)
    out.sum().backward()
    want.sum().backward()
    grads_equal(model, ref)


def test_tp_mlp_dp_by_tp_on_the_2d_mesh():
    """dtorch's extension: the styles on a 2-d mesh act on its "tp" dim;
    a batch sharded over "dp" stays so, and the gradients come out
    Partial over dp (data parallelism's all-reduce, where consumed)."""
    mesh2 = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    dtorch.manual_seed(3)
    model = toy_model(dnn)
    ref = torch_copy(model, toy_model)
    parallelize_module(model, mesh2, {"in_proj": ColwiseParallel(),
                                      "out_proj": RowwiseParallel()})
    assert model.in_proj.weight.placements == (Replicate(), Shard(0))
    assert model.out_proj.weight.placements == (Replicate(), Shard(1))
    inp = torch.rand(16, 10)
    x = distribute_tensor(inp, mesh2, [Shard(0), Replicate()])
    with CommDebugMode() as fwd:
        out = model(x)
    assert out.placements == (Shard(0), Replicate())
    want = ref(inp)
    torch.testing.assert_close(out.full_tensor(), want, **TOL)
    assert dtorch_counts(fwd) == {"c10d_functional.all_reduce": 1}  # over tp only
    out.sum().backward()
    want.sum().backward()
    grads_equal(model, ref)
    assert model.in_proj.weight.grad.placements[0].is_partial()


def test_sequence_parallel_example(torch_tp):
    """pytorch/examples' sequence_parallel_example plan: each rank's input
    is its sequence shard (one tensor: every rank holds the same local, as
    equally seeded ranks do)."""
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(4)
    model = toy_model(dnn)
    ref = torch_copy(model, toy_model)
    plan = {"in_proj": ColwiseParallel(input_layouts=Shard(0)),
            "out_proj": RowwiseParallel(output_layouts=Shard(0))}
    parallelize_module(model, mesh, plan)
    inp = torch.rand(20, 10)
    with CommDebugMode() as fwd:
        out = model(inp)
    assert out.placements == (Shard(0),) and tuple(out.shape) == (80, 5)
    want = ref(torch.cat([inp] * 4))
    torch.testing.assert_close(out.full_tensor(), want, **TOL)
    with CommDebugMode() as bwd:
        out.sum().backward()
    want.sum().backward()
    grads_equal(model, ref)
    tf, tb = torch_counts(torch_tp, toy_model, lambda tp: torch_plan(tp, plan),
                          lambda m: torch.rand(20, 10))
    assert dtorch_counts(fwd) == tf == {"c10d_functional.all_gather_into_tensor": 1,
                                        "c10d_functional.reduce_scatter_tensor": 1}
    # torch's backward all_gathers the Shard(0) gradient of out.sum() (its
    # reduce_scatter's backward); dtorch's sum gives a Replicate gradient,
    # which needs none (the input does not require grad: no reduce_scatter)
    assert tb == {"c10d_functional.all_gather_into_tensor": 1}
    assert dtorch_counts(bwd) == {}


def test_sequence_parallel_block(torch_tp):
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(5)
    block = sp_block(dnn)
    ref = torch_copy(block, sp_block)
    parallelize_module(block, mesh, SP_PLAN())
    assert block.norm.weight.placements == (Replicate(),)
    g = torch.randn(2, 8, 16)
    leaf = dtorch.Tensor(g, requires_grad=True)
    x = distribute_tensor(leaf, mesh, [Shard(1)])
    with CommDebugMode() as fwd:
        out = block(x)
    assert out.placements == (Shard(1),)
    gr = g.clone().requires_grad_()
    want = ref(gr)
    torch.testing.assert_close(out.full_tensor(), want, **TOL)
    out.sum().backward()
    want.sum().backward()
    grads_equal(block, ref)
    torch.testing.assert_close(leaf.grad.to_torch(), gr.grad, **TOL)
    # torch: each rank's input is its local sequence shard (its residual
    # adds locals: the styles' use_local_output)
    tf, _ = torch_counts(torch_tp, sp_block, lambda tp: torch_plan(tp, SP_PLAN()),
                         lambda m: torch.randn(2, 2, 16))
    assert dtorch_counts(fwd) == tf == {"c10d_functional.all_gather_into_tensor": 1,
                                        "c10d_functional.reduce_scatter_tensor": 1}


def emb_model(nn):
    class Emb(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(12, 8)
            self.pos = nn.Embedding(12, 8)

        def forward(self, i):
            return self.tok(i) + self.pos(i)
    return Emb()


def test_embeddings_colwise_and_rowwise():
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(6)
    model = emb_model(dnn)
    ref = torch_copy(model, emb_model)
    parallelize_module(model, mesh, {"tok": ColwiseParallel(output_layouts=Replicate()),
                                     "pos": RowwiseParallel(input_layouts=Replicate())})
    assert model.tok.weight.placements == (Shard(1),)
    assert model.pos.weight.placements == (Shard(0),)
    idx = torch.tensor([[0, 5, 11], [3, 3, 7]])
    out = model(idx)
    want = ref(idx)
    torch.testing.assert_close(out.full_tensor(), want, **TOL)
    out.sum().backward()
    want.sum().backward()
    grads_equal(model, ref)


def test_wildcards_and_prepare_module_output():
    def stack(nn):
        class S(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([toy_model(nn) for _ in range(3)])

            def forward(self, x):
                return [layer(x) for layer in self.layers]
        return S()
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(7)
    model = stack(dnn)
    parallelize_module(model, mesh, {"layers.*.in_proj": ColwiseParallel(),
                                     "layers.*.out_proj": RowwiseParallel()})
    for i in range(3):
        assert model.layers[i].in_proj.weight.placements == (Shard(0),)
        assert model.layers[i].out_proj.weight.placements == (Shard(1),)
    inp = torch.rand(4, 10)
    outs = model(inp)
    assert [o.placements for o in outs] == [(Replicate(),)] * 3
    # PrepareModuleOutput: the output annotated and redistributed
    dtorch.manual_seed(8)
    m = toy_model(dnn)
    ref = torch_copy(m, toy_model)
    parallelize_module(m, mesh, {"in_proj": ColwiseParallel(),
                                 "out_proj": RowwiseParallel(),
                                 "": PrepareModuleOutput(output_layouts=Replicate(),
                                                         desired_output_layouts=Shard(0))})
    inp = torch.rand(8, 10)
    out = m(inp)
    assert out.placements == (Shard(0),)
    torch.testing.assert_close(out.full_tensor(), ref(inp), **TOL)


def torch_loss_parallel_counts(torch_tp):
    """torch's loss_parallel forward counts on class-sharded logits."""
    _, DeviceMesh = torch_tp
    from torch.distributed.tensor import Shard as TS, distribute_tensor as tdistribute
    from torch.distributed.tensor.debug import CommDebugMode as TorchComm
    from torch.distributed.tensor.parallel import loss_parallel as torch_lp
    x = tdistribute(torch.randn(12, 8), DeviceMesh("cpu", [0, 1, 2, 3]), [TS(1)])
    with torch_lp():
        with TorchComm() as c:
            torch.nn.functional.cross_entropy(x, torch.randint(0, 8, (12,)))
    return {op_name(k): v for k, v in c.get_comm_counts().items() if v}


def test_loss_parallel_matches_torch(torch_tp):
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(9)
    model = toy_model(dnn)
    ref = torch_copy(model, toy_model)
    parallelize_module(model, mesh, {
        "in_proj": ColwiseParallel(),
        "out_proj": RowwiseParallel(output_layouts=Replicate())})
    # logits sharded on the class dim, as a colwise vocabulary projection gives
    head = dnn.Linear(5, 8)
    ref_head = torch.nn.Linear(5, 8)
    ref_head.load_state_dict({k: v.to_torch() for k, v in head.state_dict().items()})
    parallelize_module(head, mesh, ColwiseParallel(use_local_output=False))
    inp = torch.rand(12, 10)
    target = torch.tensor([0, 7, 3, 1, -100, 2, 6, 5, 4, 7, 0, 1])
    for smoothing in (0.0, 0.1):
        logits = head(model(inp))
        assert logits.placements == (Shard(1),)
        with loss_parallel():
            with CommDebugMode() as comm:
                loss = dF.cross_entropy(logits, target, label_smoothing=smoothing)
            with CommDebugMode() as bwd:
                loss.backward()
        want = torch.nn.functional.cross_entropy(ref_head(ref(inp)), target,
                                                 label_smoothing=smoothing)
        want.backward()
        torch.testing.assert_close(loss.full_tensor(), want.detach(), **TOL)
        grads_equal(model, ref)
        grads_equal(head, ref_head)
        counts = dtorch_counts(comm)
        assert "c10d_functional.all_gather_into_tensor" not in counts  # never gathered
        assert counts == {"c10d_functional.all_reduce": 3 if smoothing == 0 else 4}
        if smoothing == 0:
            assert counts == torch_loss_parallel_counts(torch_tp)
        # backward: the head's input gradient (Partial) to its Replicate input
        assert dtorch_counts(bwd) == {"c10d_functional.all_reduce": 1}
        for m in (model, head, ref, ref_head):
            m.zero_grad()
    assert dF.cross_entropy is not None and dF.cross_entropy.__module__ == "dtorch.nn.functional"
    with loss_parallel():
        with pytest.raises(ValueError, match="class weights are not supported"):
            dF.cross_entropy(head(model(inp)), target, weight=torch.ones(8))
        with pytest.raises(ValueError, match=r"target shape \(3,\) does not match logits"):
            dF.cross_entropy(head(model(inp)), target[:3])


def test_plan_errors():
    mesh = init_device_mesh("cpu", (4,))
    model = toy_model(dnn)
    with pytest.raises(ValueError, match=r"plan key 'in_prj': no submodule of the module "
                                         r"matches 'in_prj' \(its children: \['in_proj', "
                                         r"'relu', 'out_proj'\]\)"):
        parallelize_module(model, mesh, {"in_prj": ColwiseParallel()})
    with pytest.raises(ValueError, match=r"plan key 'in_proj.x': no submodule of in_proj"):
        parallelize_module(model, mesh, {"in_proj.x": ColwiseParallel()})
    with pytest.raises(TypeError, match=r"the plan's style for 'in_proj' is str, not a "
                                        r"ParallelStyle"):
        parallelize_module(model, mesh, {"in_proj": "colwise"})
    with pytest.raises(TypeError, match="parallelize_plan must be a ParallelStyle or a dict"):
        parallelize_module(model, mesh, ["in_proj"])
    with pytest.raises(TypeError, match="device_mesh 4 is not a DeviceMesh"):
        parallelize_module(model, 4, {"in_proj": ColwiseParallel()})
    with pytest.raises(NotImplementedError, match="ColwiseParallel only supports nn.Linear "
                                                  "and nn.Embedding, not ReLU"):
        parallelize_module(model, mesh, {"relu": ColwiseParallel()})
    with pytest.raises(NotImplementedError, match="RowwiseParallel only supports .* not LayerNorm"):
        parallelize_module(dnn.LayerNorm(4), mesh, RowwiseParallel())
    with pytest.raises(TypeError, match="ColwiseParallel: input_layouts 'R' is not a Placement"):
        ColwiseParallel(input_layouts="R")
    with pytest.raises(ValueError, match="input_layouts .* and desired_input_layouts .* differ"):
        PrepareModuleInput(input_layouts=(Shard(0), None), desired_input_layouts=(Replicate(),))
    # nothing was changed by the failed calls
    assert not isinstance(model.in_proj.weight, DTensor)
    with pytest.warns(UserWarning, match="no parallelize_plan"):
        parallelize_module(model, mesh)


def test_distribute_module_against_torch():
    """distribute_module: partition_fn per submodule, the rest replicated,
    input_fn / output_fn as forward hooks (torch's semantics)."""
    from dtorch.distributed.tensor import distribute_module
    from dtorch.distributed.tensor._api import distribute_param
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(10)
    model = toy_model(dnn)
    ref = torch_copy(model, toy_model)
    seen = []

    def partition(name, mod, m):
        seen.append(name)
        # colwise / rowwise by hand; out_proj.bias is left to the default
        if name == "in_proj":
            distribute_param(mod, "weight", m, [Shard(0)])
            distribute_param(mod, "bias", m, [Shard(0)])
        if name == "out_proj":
            distribute_param(mod, "weight", m, [Shard(1)])

    def input_fn(mod, inputs, m):
        return (distribute_tensor(inputs[0], m, [Replicate()]),)

    def output_fn(mod, outputs, m):
        return outputs.redistribute(m, [Replicate()])

    distribute_module(model, mesh, partition, input_fn, output_fn)
    assert seen == ["", "in_proj", "relu", "out_proj"]
    assert model.in_proj.weight.placements == (Shard(0),)
    assert model.out_proj.weight.placements == (Shard(1),)
    assert model.out_proj.bias.placements == (Replicate(),)  # replicated by default
    inp = torch.rand(8, 10)
    out = model(inp)
    assert out.placements == (Replicate(),)
    want = ref(inp)
    torch.testing.assert_close(out.full_tensor(), want, **TOL)
    out.sum().backward()
    want.sum().backward()
    grads_equal(model, ref)
    with pytest.raises(RuntimeError, match="distribute_module should only be called once"):
        distribute_module(model, mesh)
    with pytest.raises(TypeError, match="distribute_module: input_fn 3 is not callable"):
        distribute_module(toy_model(dnn), mesh, input_fn=3)


def test_prepare_module_input_kwargs():
    class Two(dnn.Module):
        def forward(self, a, *, b):
            return a, b
    mesh = init_device_mesh("cpu", (4,))
    m = parallelize_module(Two(), mesh, PrepareModuleInput(
        input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),),
        input_kwarg_layouts={"b": Replicate()}, desired_input_kwarg_layouts={"b": Shard(1)}))
    a, b = torch.randn(2, 4), torch.randn(3, 8)
    with CommDebugMode() as comm:
        da, db = m(a, b=b)
    assert da.placements == (Replicate(),) and db.placements == (Shard(1),)
    torch.testing.assert_close(da.full_tensor(), torch.cat([a] * 4))
    torch.testing.assert_close(db.full_tensor(), b)
    assert dtorch_counts(comm) == {"c10d_functional.all_gather_into_tensor": 1}
    with pytest.raises(ValueError, match="the module got 2 inputs but input_layouts has 1"):
        parallelize_module(Two(), mesh, PrepareModuleInput(
            input_layouts=Shard(0), desired_input_layouts=Replicate()))(a, b, b=b)


def test_one_style_for_a_linear_and_an_embedding_under_a_mesh_block():
    def model_fn(nn):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(8, 12)
                self.proj = nn.Linear(12, 4)

            def forward(self, i):
                return self.proj(self.emb(i))
        return M()
    mesh = init_device_mesh("cpu", (4,))
    dtorch.manual_seed(11)
    model = model_fn(dnn)
    ref = torch_copy(model, model_fn)
    with mesh:  # parallelize_module's default mesh
        parallelize_module(model, None, {"emb": ColwiseParallel(), "proj": RowwiseParallel()})
    idx = torch.tensor([[1, 2, 7], [0, 0, 5]])
    # one Rowwise instance on both kinds: each keeps its own desired input
    # (Embedding: Replicate(); Linear: Shard(-1))
    both = model_fn(dnn)
    ref_both = torch_copy(both, model_fn)
    parallelize_module(both, mesh, {"*": RowwiseParallel(input_layouts=Replicate())})
    assert both.emb.weight.placements == (Shard(0),)
    assert both.proj.weight.placements == (Shard(1),)
    torch.testing.assert_close(both(idx).full_tensor(), ref_both(idx), **TOL)
    out = model(idx)
    want = ref(idx)
    torch.testing.assert_close(out.full_tensor(), want, **TOL)
    out.sum().backward()
    want.sum().backward()
    grads_equal(model, ref)
