"""loom.compile and loom.report: the compiler driver in-process (pytest).

Run: PYTHONPATH=python-bindings python3 -m pytest python-bindings/tests
(ctest's python-api test does).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

import loom
from loom.models.llama import LlamaConfig, build_forward
from loom.opt import run_opt_with_diagnostics


@pytest.fixture(scope="module")
def forward() -> str:
    return build_forward(LlamaConfig(layers=2, dim=32, heads=2, kv_heads=2, ffn=64, vocab=64,
                                     seq=16, batch=4))


@pytest.fixture
def no_subprocess(monkeypatch):
    """Fails the test if the compile path starts a process."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a subprocess was started: {args[0] if args else kwargs}")
    for name in ("run", "Popen", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, refuse)
    monkeypatch.setattr(os, "system", refuse)


def test_step_in_process(forward, no_subprocess):
    step = loom.compile(forward, emit="step", world_size=2, zero_stage=3)
    assert step.path is None
    # ZeRO-3 gathers each parameter before its use and reduce-scatters its gradient.
    assert "coll.all_gather_start" in step.text
    assert "coll.reduce_scatter_start" in step.text


def test_plan_matches_the_planned_module(forward, no_subprocess):
    planned = loom.compile(forward, emit="memory-plan")
    (plan,) = planned.plans
    peak = int(re.search(r"train.timeline_peak_bytes = (\d+)", planned.text).group(1))
    arena = int(re.search(r"train.arena_bytes = (\d+)", planned.text).group(1))
    assert plan["stage"] == 0
    assert plan["peak_bytes"] == peak > 0
    assert plan["arena_bytes"] == arena > 0


def test_pipeline_stages_each_planned(forward, no_subprocess):
    planned = loom.compile(forward, emit="memory-plan", world_size=2, pipeline_stages=2,
                           microbatches=2)
    assert [plan["stage"] for plan in planned.plans] == [0, 1]
    assert all(plan["peak_bytes"] > 0 for plan in planned.plans)
    assert "module @stage0" in planned.text and "module @stage1" in planned.text


def test_llvm_and_trainer_in_process(forward, tmp_path):
    """The backend in-process, after the MLIR module is freed: LLVM IR, and
    a pipeline trainer whose code is generated in partitions (the link is
    a subprocess, so no no_subprocess here)."""
    llvm = loom.compile(forward, emit="llvm", world_size=2, pipeline_stages=2, microbatches=2)
    assert "define" in llvm.text and "loom_step" in llvm.text
    trainer = loom.compile(forward, tmp_path / "trainer", world_size=2, pipeline_stages=2,
                           microbatches=2)
    assert trainer.path == str(tmp_path / "trainer")
    assert os.access(trainer.path, os.X_OK)


def test_manifest_names_the_parameters(forward, no_subprocess):
    lowered = loom.compile(forward, emit="llvm-mlir", world_size=2, zero_stage=3)
    (manifest,) = lowered.manifests
    params = {t["name"]: t for t in manifest["tensors"] if t["role"] == "param" and t["kind"] == "arg"}
    assert set(params) == set(re.findall(r'train.param = "([^"]+)"', forward))
    # Shards: each rank holds half of every parameter's elements (padded up).
    for tensor in params.values():
        local = 1
        for d in tensor["local_shape"]:
            local *= d
        full = 1
        for d in tensor["full_shape"]:
            full *= d
        assert local * 2 >= full


def test_errors_carry_the_diagnostics(forward):
    with pytest.raises(loom.CompileError, match="needs --zero-stage 1, 2 or 3"):
        loom.compile(forward, emit="step", world_size=4)
    with pytest.raises(loom.CompileError, match="zero-stage"):
        loom.compile(forward, emit="step", zero_stage=7)
    with pytest.raises(loom.CompileError, match="Unknown command line argument"):
        loom.compile(forward, emit="step", no_such_option=1)
    with pytest.raises(loom.CompileError, match="Dialect .nonsense. not found") as error:
        loom.compile("func.func @f() { nonsense.op }", emit="step", name="bad.mlir")
    assert "bad.mlir:1" in error.value.diagnostics
    with pytest.raises(loom.CompileError, match="has no function with a train.loss result"):
        loom.compile("func.func @f() { return }", emit="step")
    # A failed compile leaves the driver usable: options start from the defaults again.
    assert loom.compile(forward, emit="training-step").text


def test_report_in_process(forward, no_subprocess):
    step = loom.compile(forward, emit="step", world_size=2, zero_stage=3).text
    # The step carries the target it was compiled for (the CPU's by default).
    own = loom.report(step)
    assert own["target"] == {"device": "cpu", "compute_slowdown": 0, "profile": None}
    report = loom.report(step, device="h100-nvlink")
    assert report["device"] == "h100-nvlink"
    assert report["table"].startswith("coll-report: @forward on h100-nvlink")
    assert report["peak_bytes"] > 0
    assert report["makespan_us"] >= report["lower_bound_us"] > 0
    assert report["table"].startswith("coll-report: @")
    with pytest.raises(loom.CompileError):
        loom.report("func.func @f( {", device="cpu")


def test_compiles_and_runs_a_trainer(forward, tmp_path):
    trainer = tmp_path / "trainer"
    compiled = loom.compile(forward, output=trainer)
    assert compiled.path == str(trainer) and os.access(trainer, os.X_OK)
    data = tmp_path / "data.txt"
    # Bytes are the tokens: below the model's vocabulary of 64.
    data.write_text("3 + 4 = 7; 12 / 4 = 3. (8 - 5) * 2 = 6! " * 64)
    assert max(data.read_bytes()) < 64
    log = tmp_path / "log.jsonl"
    # The trainer is a program of its own: running it is a process, compiling it was not.
    subprocess.run([str(trainer), "--data", str(data), "--steps", "3", "--log", str(log)],
                   check=True, capture_output=True, timeout=600)
    lines = log.read_text().splitlines()
    assert len(lines) >= 3 and all('"loss"' in line for line in lines[-3:])
    # Letters are not below 64: the trainer refuses them before the first
    # step, naming the first ('a' = 97 at offset 4), instead of reading
    # past the embedding table.
    letters = tmp_path / "letters.txt"
    letters.write_text("3 + abc " * 256)
    proc = subprocess.run([str(trainer), "--data", str(letters), "--steps", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert ("token 97 at token offset 4 (byte 4) is not below the model's vocabulary of 64"
            in proc.stderr), proc.stderr


def test_trainer_runs_and_returns_its_state(forward, tmp_path):
    """Compiled.run launches the trainer (mpirun for its ranks) and returns
    its log; state_dict reads the checkpoint it wrote, by parameter name."""
    data = tmp_path / "data.txt"
    data.write_text("3 + 4 = 7; 12 / 4 = 3. (8 - 5) * 2 = 6! " * 64)
    mpi = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "LOOMRT_TIMEOUT_S": "60"}
    runs = {}
    # The same global batch of 4 sequences: 4 on one rank, 2 on each of two.
    halves = build_forward(LlamaConfig(layers=2, dim=32, heads=2, kv_heads=2, ffn=64, vocab=64,
                                       seq=16, batch=2))
    for ranks, source, options in ((1, forward, {}),
                                   (2, halves, {"world_size": 2, "zero_stage": 3})):
        trainer = loom.compile(source, output=tmp_path / f"trainer{ranks}", **options)
        assert trainer.world_size() == ranks
        rows = trainer.run(data, steps=3, checkpoint=tmp_path / f"ckpt{ranks}", env=mpi,
                           timeout_s=600)
        assert [row["step"] for row in rows] == [0, 1, 2]
        runs[ranks] = [row["loss"] for row in rows]
        state = trainer.state_dict()
        params = {t["name"]: t["full_shape"] for t in trainer.manifests[0]["tensors"]
                  if t["role"] == "param" and t["kind"] == "arg"}
        assert {n: list(a.shape) for n, a in state.items()} == params
    # ZeRO-3 over 2 ranks: the same losses as one rank.
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(runs[2], runs[1])), runs
    # A run that fails says why.
    with pytest.raises(loom.TrainerError, match="compiled for 1 ranks but runs on 2"):
        trainer = loom.Compiled(path=str(tmp_path / "trainer1"),
                                manifests=[{"properties": {"world_size": "1"}}])
        trainer.run(data, steps=1, ranks=2, env=mpi, timeout_s=600)


def test_run_opt_in_process(forward, no_subprocess):
    step = loom.run_opt(forward, ["--train-autodiff", "--train-optimizer=kind=sgd lr=0.1"])
    assert "train.loss" in step and "train.param" in step
    # The same passes as loom-opt's textual pipeline.
    again = loom.run_opt(forward, ["--pass-pipeline=builtin.module(train-autodiff,"
                                   "train-optimizer{kind=sgd lr=0.1})"])
    assert again == step
    with pytest.raises(loom.LoomOptError, match="unknown pass or option '--no-such-pass'"):
        loom.run_opt(forward, ["--no-such-pass"])
    with pytest.raises(loom.LoomOptError, match="expected"):
        loom.run_opt("func.func @f( {", [])


def test_run_opt_prints_as_loom_opt(forward):
    args = ["--train-autodiff", "--zero-partition=stage=3 world-size=2", "--canonicalize",
            "--mlir-print-debuginfo"]
    tool = subprocess.run([loom.find_tool("loom-opt"), *args, "-"], input=forward,
                          capture_output=True, text=True, check=True).stdout
    assert loom.run_opt(forward, args) == tool


def test_run_opt_nests_function_passes(forward, no_subprocess):
    # train-fuse-linear-cross-entropy runs on func.func: nested, as loom-opt does.
    fused = loom.run_opt(forward, ["--train-fuse-linear-cross-entropy=chunk-tokens=8"])
    assert "train.linear_cross_entropy" in fused


def test_run_opt_returns_the_remarks(no_subprocess):
    # A pass's remarks on success (what loom-opt prints to stderr) come back
    # beside the module: tests count the scheduler's fallbacks by them.
    step = ("func.func @f(%x: tensor<64xf32> {train.param = \"x\"}) -> tensor<64xf32> {\n"
            "  %c = coll.comm_world : !coll.comm<4>\n"
            "  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<64xf32>, "
            "!coll.comm<4>) -> !coll.future<tensor<256xf32>>\n"
            "  %w = coll.wait %f : !coll.future<tensor<256xf32>>\n"
            "  return %x : tensor<64xf32>\n}\n")
    text, remarks = run_opt_with_diagnostics(
        step, ["--loom-set-target=device=cpu",
               "--coll-overlap-schedule=memory-limit-mb=0.0001 synchronous-below-floor=true"])
    assert "coll.wait" in text
    assert "remark: coll-overlap-schedule: memory-limit-mb=0.00 is below the synchronous" in remarks
    _, quiet = run_opt_with_diagnostics(step, ["--canonicalize"])
    assert quiet == ""
