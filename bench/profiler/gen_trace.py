#!/usr/bin/python3
"""Write a synthetic Kineto trace of (about) a given size, streaming.

Usage: /usr/bin/python3 gen_trace.py OUT.json SIZE_MB [--rank R]

The event mix is that of a real PyTorch-profiler GPU trace (2024 vintage):
ProfilerStep and user annotations, aten cpu_ops with Input Dims / Input type /
Concrete Inputs, cudaLaunchKernel runtime calls, kernels with the full Kineto
args (grid, block, occupancy, …), ac2g flow pairs, memcpys, NCCL kernels with
collective metadata and record_param_comms, [memory] events; float µs with ns
decimals relative to baseTimeNanoseconds. Deterministic for a given size.
"""
import random
import sys

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "ampere_sgemm_128x64_tn",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)",
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, long, int, int, int, int, int, int, int, int, int, int, float*, long*)",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_trt",
]
OPS = ["aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::add_", "aten::relu_",
       "aten::batch_norm", "aten::_batch_norm_impl_index", "aten::cudnn_batch_norm", "aten::empty", "aten::max_pool2d", "aten::addmm"]


def main():
    out, size_mb = sys.argv[1], float(sys.argv[2])
    rank = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--rank" else 0
    target = int(size_mb * 1e6)
    rng = random.Random(42)
    base_us = 4458676522690.655
    f = open(out, "w", buffering=1 << 20)
    head = ('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85093171200, '
            '"computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024, "numSms": 108}], '
            '"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": 8, "pg_count": 1, "pg_config": [{"pg_name": "0", '
            '"pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 8, "ranks": [0, 1, 2, 3, 4, 5, 6, 7]}], '
            '"nccl_version": "2.20.5"}, "record_shapes": 1, "profile_memory": 1, "with_stack": 0, "cupti_version": 18, '
            '"cuda_runtime_version": 12040, "cuda_driver_version": 12040, "baseTimeNanoseconds": 1711964646000000000, '
            '"displayTimeUnit": "ms", "traceEvents": [\n') % rank
    f.write(head)
    written = len(head)
    t = 0.0
    corr = 0
    ext = 0
    step = 0
    first = True
    buf = []
    while written < target:
        step_start = t
        evs = []
        evs.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 1234, "tid": 1234, "ts": %.3f, "dur": %.3f, "args": {"External id": %d, "Record function id": 0, "Ev Idx": %d}}'
                   % (step, base_us + t, 90000.5, ext, ext))
        for i in range(400):
            ext += 1
            corr += 1
            op = OPS[i % len(OPS)]
            d = rng.uniform(5, 50)
            evs.append('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": 1234, "tid": 1234, "ts": %.3f, "dur": %.3f, "args": {"External id": %d, "Record function id": 0, "Sequence number": %d, "Fwd thread id": 0, "Ev Idx": %d, "Input Dims": [[32, 64, 56, 56], [64, 64, 3, 3], [64], [], []], "Input type": ["float", "float", "float", "ScalarList", "ScalarList"], "Input Strides": [[200704, 3136, 56, 1], [576, 9, 3, 1], [1], [], []], "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]"]}}'
                       % (op, base_us + t, d, ext, ext, ext))
            evs.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1234, "tid": 1234, "ts": %.3f, "dur": %.3f, "args": {"External id": %d, "cbid": 211, "correlation": %d}}'
                       % (base_us + t + 2, 4.2, ext, corr))
            kt = t + rng.uniform(10, 30)
            kd = rng.uniform(3, 200)
            evs.append('{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %.3f, "dur": %.3f, "args": {"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": %d, "registers per thread": 38, "shared memory": 0, "blocks per SM": 18.962963, "warps per SM": 75.851852, "grid": [2048, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %%": 100}}'
                       % (KERNELS[i % len(KERNELS)], base_us + kt, kd, ext, corr))
            evs.append('{"ph": "s", "id": %d, "pid": 1234, "tid": 1234, "ts": %.3f, "cat": "ac2g", "name": "ac2g"}' % (corr, base_us + t + 2))
            evs.append('{"ph": "f", "id": %d, "pid": 0, "tid": 7, "ts": %.3f, "cat": "ac2g", "name": "ac2g", "bp": "e"}' % (corr, base_us + kt))
            if i % 50 == 0:
                corr += 1
                evs.append('{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1234, "tid": 1234, "ts": %.3f, "dur": 12.5, "args": {"External id": %d, "Collective name": "allreduce", "In msg nelems": 6553600, "Out msg nelems": 6553600, "Group size": 8, "dtype": "Float", "In split size": "[]", "Out split size": "[]", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Global rank start": 0, "Global rank stride": 1, "Seq": %d}}'
                           % (base_us + t, ext, corr))
                evs.append('{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "pid": 0, "tid": 20, "ts": %.3f, "dur": %.3f, "args": {"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": 20, "correlation": %d, "registers per thread": 96, "shared memory": 0, "grid": [4, 1, 1], "block": [640, 1, 1], "Collective name": "allreduce", "In msg nelems": 6553600, "Out msg nelems": 6553600, "Group size": 8, "dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Seq": %d}}'
                           % (base_us + t + 20, rng.uniform(500, 3000), ext, corr, corr))
                evs.append('{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1234, "tid": 1234, "ts": %.3f, "args": {"Device Type": 1, "Device Id": 0, "Addr": %d, "Bytes": %d, "Total Allocated": %d, "Total Reserved": 8589934592}}'
                           % (base_us + t, 140000000000000 + corr * 4096, 26214400, 4000000000 + (corr % 97) * 26214400))
            t += d + rng.uniform(1, 10)
        step += 1
        t = max(t, step_start + 90001)
        chunk = (",\n" if not first else "") + ",\n".join(evs)
        first = False
        f.write(chunk)
        written += len(chunk)
    tail = '\n], "traceName": "rank%d.pt.trace.json"}\n' % rank
    f.write(tail)
    f.close()


if __name__ == "__main__":
    main()
