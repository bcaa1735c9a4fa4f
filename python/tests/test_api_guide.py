"""The DTorch API guide's snippets, as the guide writes them (section by section),
each followed by checks of what the document says happens, against torch
computing the same thing on the fetched inputs."""
import asyncio
import warnings

import pytest
import torch

import dtorch

warnings.filterwarnings("ignore", category=dtorch.distributed_spec.DTorchEmulationWarning)


def test_1_single_device_api_is_pytorchs():
    import dtorch

    a = dtorch.randn(4, 8)               # 构造 / 工厂函数（zeros、ones、randn、full、arange …）
    b = dtorch.matmul(a, a.transpose(0, 1))  # 函数式算子
    c = (a + a * 2.0).relu().sum()       # 运算符重载（+ - * / @）+ 方法风格 + reduce

    ta = a.to_torch()
    assert tuple(a.shape) == (4, 8)
    torch.testing.assert_close(b.to_torch(), ta @ ta.T)
    torch.testing.assert_close(c.to_torch(), (ta + ta * 2.0).relu().sum())
    assert dtorch.float32 is torch.float32
    assert dtorch.dtype is torch.dtype and dtorch.device is torch.device
    assert dtorch.finfo is torch.finfo and dtorch.iinfo is torch.iinfo
    assert c.dtype is torch.float32


def test_2_device_mesh():
    from dtorch.distributed_spec import DeviceMesh, init_device_mesh

    # 方式 1：构造函数创建
    #   单设备：只传 device_type
    mesh = DeviceMesh("cuda")
    assert mesh.size() == 1
    #   分布式：mesh 可传嵌套 list（或 torch.Tensor），描述各维度上的设备编号
    mesh = DeviceMesh("cuda", [[0, 1], [2, 3]], mesh_dim_names=["dp", "tp"])  # 2D: dp=2, tp=2
    assert mesh.shape == (2, 2) and mesh.mesh_dim_names == ("dp", "tp")
    assert mesh.mesh.tolist() == [[0, 1], [2, 3]]
    mesh_t = DeviceMesh("cuda", torch.tensor([[3, 2], [1, 0]]), mesh_dim_names=["dp", "tp"])
    assert mesh_t.mesh.tolist() == [[3, 2], [1, 0]]

    # 方式 2：通过 init_device_mesh 创建（推荐）
    mesh = init_device_mesh("cuda", mesh_shape=2, mesh_dim_names=["dp"])             # 1D: 2 卡 DP
    assert mesh.shape == (2,) and mesh.mesh_dim_names == ("dp",)
    mesh = init_device_mesh("cuda", mesh_shape=(2, 2), mesh_dim_names=["dp", "tp"])  # 2D: dp=2, tp=2
    assert mesh.shape == (2, 2) and mesh.device_type == "cuda"
    assert repr(mesh) == "DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))"


def test_2_dtensor_creation():
    from dtorch import Tensor, DeviceMesh
    from dtorch.distributed_spec import (
        init_device_mesh, Shard, Replicate, Partial
    )

    # 创建 DeviceMesh
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=["dp", "tp"])

    # 创建 DTensor：沿 dp 维 Shard batch，沿 tp 维 Replicate
    dt = dtorch.zeros(
        4, 128, 256,
        device_mesh=mesh,
        placements=[Shard(0), Replicate()]
    )
    # shape=(4, 128, 256), device_mesh=cuda(2x2), placements=[S0, R]
    assert tuple(dt.shape) == (4, 128, 256)
    assert dt.device_mesh is mesh
    assert list(dt.placements) == [Shard(0), Replicate()]
    assert tuple(dt.to_local(3).shape) == (2, 128, 256)  # rank 3 = (dp 1, tp 1)
    assert Tensor is dtorch.Tensor and DeviceMesh is dtorch.DeviceMesh
    assert Partial() == Partial("sum")

    # From PyTorch Tensor
    torch_t = torch.randn(4, 128)
    dt = dtorch.Tensor(torch_t, device_mesh=mesh, placements=[Shard(0), Replicate()])
    torch.testing.assert_close(dt.to_local(2), torch_t[2:4])  # rank 2 = (dp 1, tp 0)

    # To PyTorch Tensor
    local_tensor = dt.to_torch()  # 返回当前设备上的 torch.Tensor
    assert isinstance(local_tensor, torch.Tensor)
    torch.testing.assert_close(local_tensor, torch_t, rtol=0, atol=0)


def test_2_device_and_device_mesh_are_exclusive():
    from dtorch.distributed_spec import init_device_mesh
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=["dp", "tp"])
    with pytest.raises(dtorch.DTorchError, match="exclusive"):
        dtorch.zeros(4, 128, device="cuda", device_mesh=mesh)
    with pytest.raises(dtorch.DTorchError, match="exclusive"):
        dtorch.Tensor(torch.ones(2), device="cpu", device_mesh=mesh)


def test_3_mesh_and_placement_propagation():
    from dtorch.distributed_spec import init_device_mesh, Shard, Replicate

    mesh = init_device_mesh("cuda", 2, mesh_dim_names=["dp"])
    a = dtorch.zeros(4, 128, device_mesh=mesh, placements=[Shard(0)])
    b = dtorch.zeros(4, 128, device_mesh=mesh, placements=[Replicate()])

    c = dtorch.add(a, b)   # 输入 DeviceMesh 一致，输出 DeviceMesh 自动为 mesh
    assert c.device_mesh is mesh

    a = dtorch.zeros(4, 128, device_mesh=mesh, placements=[Shard(0)])
    b = dtorch.relu(a)      # placements 保持不变：[Shard(0)]
    c = dtorch.add(a, a)    # placements 保持不变：[Shard(0)]
    assert list(b.placements) == [Shard(0)] and list(c.placements) == [Shard(0)]

    mesh_2d = init_device_mesh("cuda", (2, 2), mesh_dim_names=["dp", "tp"])
    a = dtorch.zeros(4, 128, device_mesh=mesh_2d, placements=[Shard(0), Replicate()])
    b = dtorch.nn.functional.softmax(a, dim=-1)
    # b.placements = [Shard(0), Replicate()]
    assert list(b.placements) == [Shard(0), Replicate()]
    torch.testing.assert_close(b.to_torch(), torch.full((4, 128), 1 / 128))


def test_3_illegal_placements_raise_with_the_legal_ones():
    from dtorch.distributed_spec import init_device_mesh, Shard, Replicate
    mesh_2d = init_device_mesh("cuda", (2, 2), mesh_dim_names=["dp", "tp"])
    a = dtorch.zeros(4, 128, device_mesh=mesh_2d, placements=[Replicate(), Shard(1)])
    with pytest.raises(dtorch.PlacementError) as e:
        dtorch.nn.functional.softmax(a, dim=-1)
    msg = str(e.value)
    assert "softmax" in msg and "S(1)" in msg and "legal on mesh dim 1: [R], [S(0)]" in msg
    assert e.value.status == "DT_ERR_PLACEMENT"
    # the fix the document gives: redistribute first
    b = dtorch.nn.functional.softmax(a.redistribute(mesh_2d, [Replicate(), Replicate()]), dim=-1)
    assert list(b.placements) == [Replicate(), Replicate()]


def test_4_redistribute():
    from dtorch.distributed_spec import init_device_mesh, Shard, Replicate
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=["dp", "tp"])
    new_device_mesh = mesh
    value = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    tensor = dtorch.Tensor(value, device_mesh=mesh, placements=[Replicate(), Shard(1)])

    new_tensor = tensor.redistribute(
        device_mesh=new_device_mesh,   # 目标 DeviceMesh
        placements=[Shard(0), Replicate()]  # 目标 Placements
    )
    assert list(new_tensor.placements) == [Shard(0), Replicate()]
    torch.testing.assert_close(new_tensor.to_torch(), value, rtol=0, atol=0)
    torch.testing.assert_close(new_tensor.to_local(1), value[0:2])

    target_tensor = dtorch.zeros(4, 8, device_mesh=mesh, placements=[Shard(1), Shard(0)])
    new_tensor = tensor.redistribute_like(target_tensor)
    assert list(new_tensor.placements) == [Shard(1), Shard(0)]
    torch.testing.assert_close(new_tensor.to_torch(), value, rtol=0, atol=0)

    # device_mesh 的 dim_names = ["dp", "tp"]
    new_tensor = tensor.redistribute_by_dict(
        device_mesh=mesh,                  # 可选，默认使用当前 DeviceMesh
        placements_dict={
            "dp": Shard(0),               # dp 维度沿 batch 切分
            "tp": Replicate(),            # tp 维度复制
        },
        default_placement_mode="keep",    # 未指定的维度：raise_error / replicate / keep
    )
    assert list(new_tensor.placements) == [Shard(0), Replicate()]
    kept = tensor.redistribute_by_dict(placements_dict={"dp": Shard(0)},
                                       default_placement_mode="keep")
    assert list(kept.placements) == [Shard(0), Shard(1)]
    with pytest.raises(dtorch.DTorchError, match="tp"):
        tensor.redistribute_by_dict(placements_dict={"dp": Shard(0)},
                                    default_placement_mode="raise_error")
    rep = tensor.redistribute_by_dict(placements_dict={"dp": Shard(0)},
                                      default_placement_mode="replicate")
    assert list(rep.placements) == [Shard(0), Replicate()]


def test_5_to_torch_async_and_get():
    import dtorch

    a = dtorch.rand(1000, 1000)
    b = dtorch.rand(1000, 1000)
    c = dtorch.matmul(a, b)

    # 异步获取结果
    future = c.to_torch_async()
    # ... 可以继续执行其他操作，不会被阻塞 ...

    # 稍后获取结果
    result = future.get()  # 阻塞直到计算结果 ready
    want = a.to_torch().double() @ b.to_torch().double()
    torch.testing.assert_close(result.double(), want, rtol=1e-5, atol=1e-3)


def test_5_await_tensor_future():
    import asyncio
    import dtorch

    async def async_get(tensor):
        future = tensor.to_torch_async()
        result = await future  # 异步等待，不阻塞事件循环
        return result

    dtorch_x = dtorch.Tensor(torch.ones(2, 3))
    result = asyncio.run(async_get(dtorch_x))
    torch.testing.assert_close(result, torch.ones(2, 3), rtol=0, atol=0)
    assert asyncio is not None
