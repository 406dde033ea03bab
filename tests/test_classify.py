from __future__ import annotations

import pytest

from census.definitions import classify_kernel, launch_api_kind, nccl_collective
from census.definitions.triton_names import decode_triton


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096>)", "NCCL"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "NCCL"),
        ("triton_poi_fused__to_copy_add_mul_3", "Triton"),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "GEMM"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "GEMM"),
        ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>", "GEMM"),
        (
            "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, cutlass::bfloat16_t>>",
            "attention",
        ),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7", "attention"),
        ("void at::native::multi_tensor_apply_kernel<TensorListMetadata<2>>", "optimizer"),
        ("void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>", "copy/memset"),
        ("void at::native::vectorized_elementwise_kernel<8, FillFunctor<float>>", "copy/memset"),
        ("void at::native::reduce_kernel<512, 1, ReduceOp<float, MeanOps>>", "reduction"),
        ("void at::native::vectorized_layer_norm_kernel<float, float>", "reduction"),
        (
            "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>",
            "elementwise",
        ),
        ("void cudnn::fusion::convert_dq_to_16bits<true>", "other"),
    ],
)
def test_kernel_classes(name: str, cls: str) -> None:
    assert classify_kernel(name) == cls


@pytest.mark.parametrize(
    ("name", "api"),
    [
        ("cudaLaunchKernel_v7000", "cudaLaunchKernel"),
        ("cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernel"),
        ("cudaLaunchKernelExC_v11060", "cudaLaunchKernelExC"),
        ("cuLaunchKernel", "cuLaunchKernel"),
        ("cuLaunchKernelEx_ptsz", "cuLaunchKernelEx"),
        ("cudaGraphLaunch_v10000", "cudaGraphLaunch"),
        ("cuLaunchCooperativeKernelMultiDevice", "cuLaunchCooperativeKernelMultiDevice"),
        ("cuKernelGetName", None),
        ("cudaMemcpyAsync_v3020", None),
        ("cudaLaunchHostFunc_v10000", None),
    ],
)
def test_launch_api_names(name: str, api: str | None) -> None:
    assert launch_api_kind(name) == api


def test_decode_inductor_names() -> None:
    assert decode_triton("triton_poi_fused__to_copy_add_mul_3") == (
        "pointwise",
        ("_to_copy", "add", "mul"),
    )
    assert decode_triton("triton_red_fused__to_copy_add_native_layer_norm_backward_view_16") == (
        "reduction",
        ("_to_copy", "add", "native_layer_norm_backward", "view"),
    )
    assert decode_triton("triton_per_fused_sum_4") == ("persistent reduction", ("sum",))
    assert decode_triton("nvjet_sm90") is None


def test_nccl_collectives_from_both_naming_schemes() -> None:
    assert nccl_collective("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096>)") == "SendRecv"
    assert nccl_collective("ncclKernel_AllGather_RING_LL_Sum_int8_t") == "AllGather"
    assert nccl_collective("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == "ReduceScatter"
    assert nccl_collective("gemm") is None
