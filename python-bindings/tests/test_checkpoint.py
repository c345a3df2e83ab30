"""loom.checkpoint: malformed .safetensors files are errors that say what is
wrong, round trips keep every dtype, and files are replaced only when they
are regular files. (trainers.py weights runs the trainer on them.)"""

import json
import os
import struct

import numpy as np
import pytest

from loom.checkpoint import (Bf16, read_checkpoint, read_safetensors, write_checkpoint,
                             write_safetensors)


def _file(tmp_path, header: dict, data: bytes, pad: int = 0) -> str:
    text = json.dumps(header).encode() + b" " * pad
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return str(path)


def test_round_trip_keeps_every_dtype(tmp_path):
    tensors = {"f64": np.arange(3, dtype=np.float64), "f16": np.ones((2, 2), np.float16),
               "i32": np.array([-5, 7], np.int32), "u8": np.arange(4, dtype=np.uint8),
               "scalar": np.array(2.5, np.float32),
               "bf16": Bf16.from_float(np.array([1.5, -0.1], np.float32))}
    path = str(tmp_path / "t.safetensors")
    write_safetensors(path, tensors, {"k": "v"})
    back, metadata = read_safetensors(path)
    assert metadata == {"k": "v"}
    for name, value in tensors.items():
        if isinstance(value, Bf16):
            assert np.array_equal(back[name].bits, value.bits)
        else:
            assert back[name].dtype == value.dtype and np.array_equal(back[name], value)
    # The data offsets are 8-byte aligned after the header, as specified.
    (length,) = struct.unpack("<Q", open(path, "rb").read(8))
    assert length % 8 == 0


@pytest.mark.parametrize("header, data, message", [
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4,
     "does not fit bytes [0, 4)"),
    ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8,
     "starts at byte 4, expected 0"),
    ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 6,
     "2 bytes after the last tensor"),
    ({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8,
     "has dtype C64"),
    ({"w": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "lacks dtype, shape or data_offsets"),
    ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4,
     "does not fit"),
])
def test_malformed_files_say_what_is_wrong(tmp_path, header, data, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
        read_safetensors(_file(tmp_path, header, data))


def test_truncated_and_non_json_headers(tmp_path):
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="shorter than its header length"):
        read_safetensors(str(short))
    long = tmp_path / "long.safetensors"
    long.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(ValueError, match="does not fit the file"):
        read_safetensors(str(long))
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(struct.pack("<Q", 4) + b"{no}")
    with pytest.raises(ValueError, match="header is not JSON"):
        read_safetensors(str(garbage))


def test_only_regular_files_are_replaced(tmp_path):
    directory = tmp_path / "dir.safetensors"
    directory.mkdir()
    with pytest.raises(OSError, match="not a regular file"):
        write_safetensors(str(directory), {"w": np.zeros(1, np.float32)})
    assert directory.is_dir() and not os.listdir(directory)


def test_bf16_rounds_as_pytorch_does():
    values = np.array([1.0, 1.00390625, 1.01171875, -3.3, np.inf, -np.inf], np.float32)
    assert Bf16.from_float(values).bits.tolist() == [16256, 16256, 16258, 49235, 0x7F80, 0xFF80]
    nans = np.array([0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF], np.uint32).view(np.float32)
    assert np.isnan(Bf16.from_float(nans).to_float()).all()


def test_checkpoint_names_and_files(tmp_path):
    root = str(tmp_path / "ckpt")
    with pytest.raises(ValueError, match="both map to param.a_b.npy"):
        write_checkpoint(root, {"a/b": np.zeros(1, np.float32), "a_b": np.zeros(1, np.float32)})
    with pytest.raises(ValueError, match="control characters"):
        write_checkpoint(root, {"a\x01": np.zeros(1, np.float32)})
    # Nothing was left half-written, and a source with quotes still reads.
    assert not os.path.exists(root) or not os.listdir(root)
    write_checkpoint(root, {"w": np.ones(2, np.float32)}, source='my "model".safetensors')
    step, params, _ = read_checkpoint(root)
    assert step == 0 and params["w"].tolist() == [1.0, 1.0]
    mode = os.stat(os.path.join(root, "step-0", "param.w.npy")).st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_checkpoint_round_trip_and_no_overwrite(tmp_path):
    params = {"embed": np.arange(6, dtype=np.float32).reshape(2, 3),
              "layers.0.norm": Bf16.from_float(np.ones(3, np.float32))}
    root = str(tmp_path / "ckpt")
    write_checkpoint(root, params, state={"step": np.array(0, np.float32)}, step=0)
    step, got, state = read_checkpoint(root)
    assert step == 0 and set(got) == {"embed", "layers.0.norm"} and set(state) == {"step"}
    assert np.array_equal(got["embed"], params["embed"])
    assert open(os.path.join(root, "latest")).read() == "step-0\n"
    with pytest.raises(FileExistsError):
        write_checkpoint(root, params)
    with pytest.raises(ValueError, match="no blanks, quotes"):
        write_checkpoint(str(tmp_path / "other"), {"a b": np.zeros(1, np.float32)})
