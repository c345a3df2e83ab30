"""Weights in and out of Loom's trainers (docs/Weights.md).

A Loom checkpoint is ``ROOT/step-K/`` with one ``.npy`` per tensor
(``param.NAME.npy``, ``state.NAME.npy``: f32, full shape, C order) and a
``manifest.json``, and ``ROOT/latest`` naming the step directory
(docs/Runtime.md). The trainer starts from one with ``--init ROOT`` (its
parameters; optimizer state at zero, step 0) or continues one with
``--checkpoint ROOT --resume``.

This module writes a checkpoint from a ``.safetensors`` file or a PyTorch
``state_dict`` and exports a trained checkpoint's parameters to
``.safetensors`` under their own names, reading and writing the format as
its specification gives it (an 8-byte little-endian header length, a JSON
header of ``name: {dtype, shape, data_offsets}`` and ``__metadata__``, padded
with spaces to 8 bytes, then the data), with NumPy only.
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
from typing import Mapping

import numpy as np

__all__ = ["read_safetensors", "write_safetensors", "write_checkpoint", "read_checkpoint",
           "from_safetensors", "from_state_dict", "export_safetensors", "Bf16"]

# safetensors dtype names and NumPy's (BF16 has none: see Bf16).
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
_HEADER_LIMIT = 100 * 1024 * 1024
# The reference implementation's dtype order (its Dtype enum): a file lays
# out its tensors from the last of these to the first, then by name.
_DTYPE_ORDER = ["BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
                "I64", "U64"]


class Bf16:
    """A bfloat16 tensor as its raw 16-bit patterns (NumPy has no bf16)."""

    def __init__(self, bits: np.ndarray):
        self.bits = np.asarray(bits, dtype="<u2", order="C")

    @staticmethod
    def from_float(values: np.ndarray) -> "Bf16":
        """Rounds f32 values to nearest even, as PyTorch's cast does."""
        floats = np.asarray(values, dtype="<f4", order="C")
        wide = floats.view("<u4").astype(np.uint64)
        rounded = (wide + 0x7FFF + ((wide >> 16) & 1)) >> 16
        # A NaN stays a (quiet) NaN, as PyTorch makes it.
        rounded = np.where(np.isnan(floats), 0x7FC0, rounded)
        return Bf16(rounded.astype("<u2"))

    def to_float(self) -> np.ndarray:
        return (self.bits.astype("<u4") << 16).view("<f4")

    @property
    def shape(self):
        return self.bits.shape


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: str, chunks) -> None:
    """Writes `chunks` to a temporary file beside `path`, fsyncs it and
    renames it over `path` (only over a regular file), then fsyncs the
    directory: `path` is the old file or the whole new one."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.lexists(path) and not os.path.isfile(path):
        raise OSError(f"cannot write {path}: it is not a regular file")
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    try:
        # mkstemp's file is the owner's alone; a file written here is as
        # open as the umask makes new files.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    _fsync_dir(directory)


def read_safetensors(path: str) -> tuple[dict[str, np.ndarray | Bf16], dict[str, str]]:
    """The tensors of a .safetensors file (BF16 ones as Bf16) and its
    metadata. The header is checked whole before any tensor is read (each
    is read once, into its own array). Raises ValueError naming what is
    malformed."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
        (length,) = struct.unpack("<Q", prefix)
        if length > _HEADER_LIMIT or 8 + length > size:
            raise ValueError(f"{path}: header of {length} bytes does not fit the file of {size}")
        try:
            header = json.loads(f.read(length).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: header is not JSON: {e}") from None
        if not isinstance(header, dict):
            raise ValueError(f"{path}: header is not a JSON object")
        metadata = header.pop("__metadata__", {}) or {}
        body = size - 8 - length
        entries = []
        for name, info in header.items():
            try:
                dtype, shape, (begin, end) = info["dtype"], list(info["shape"]), \
                    info["data_offsets"]
                shape = [int(d) for d in shape]
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{path}: tensor '{name}' lacks dtype, shape or "
                                 "data_offsets") from None
            if dtype != "BF16" and dtype not in _DTYPES:
                raise ValueError(f"{path}: tensor '{name}' has dtype {dtype}, which Loom does "
                                 "not read")
            width = 2 if dtype == "BF16" else np.dtype(_DTYPES[dtype]).itemsize
            count = math.prod(shape)
            if any(d < 0 for d in shape) or not 0 <= begin <= end <= body or \
                    end - begin != count * width:
                raise ValueError(f"{path}: tensor '{name}' of shape {shape} and dtype {dtype} "
                                 f"does not fit bytes [{begin}, {end}) of {body}")
            entries.append((begin, end, name, dtype, shape, count))
        # The specification: the data is the tensors end to end, no holes or
        # overlaps.
        cursor = 0
        for begin, end, name, *_ in sorted(entries):
            if begin != cursor:
                raise ValueError(f"{path}: tensor '{name}' starts at byte {begin}, expected "
                                 f"{cursor} (tensors overlap or leave a hole)")
            cursor = end
        if cursor != body:
            raise ValueError(f"{path}: {body - cursor} bytes after the last tensor")
        tensors: dict[str, np.ndarray | Bf16] = {}
        for begin, _, name, dtype, shape, count in entries:
            f.seek(8 + length + begin)
            raw = np.fromfile(f, dtype="<u2" if dtype == "BF16" else _DTYPES[dtype], count=count)
            tensors[name] = Bf16(raw.reshape(shape)) if dtype == "BF16" else raw.reshape(shape)
    return tensors, metadata


def write_safetensors(path: str, tensors: Mapping[str, np.ndarray | Bf16],
                      metadata: Mapping[str, str] | None = None) -> None:
    """Writes `tensors` as a .safetensors file, durably, in the reference
    implementation's layout (tensors in its dtype order, then by name; the
    header padded with spaces to 8 bytes), so that the same tensors give
    the same bytes."""
    entries = []
    for name, value in tensors.items():
        if isinstance(value, Bf16):
            entries.append((name, "BF16", value.bits))
            continue
        array = np.asarray(value)
        kind = next((k for k, d in _DTYPES.items() if np.dtype(d) == array.dtype.newbyteorder("<")
                     or np.dtype(d) == array.dtype), None)
        if kind is None:
            raise ValueError(f"tensor '{name}': dtype {array.dtype} has no safetensors name")
        entries.append((name, kind, np.asarray(array, dtype=_DTYPES[kind], order="C")))
    entries.sort(key=lambda e: (-_DTYPE_ORDER.index(e[1]), e[0]))
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, kind, array in entries:
        header[name] = {"dtype": kind, "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    _write_durably(path, [struct.pack("<Q", len(text)), text,
                          *(array.tobytes() for _, _, array in entries)])


def _file_name(role: str, name: str) -> str:
    return f"{role}.{name}.npy".replace("/", "_")


def _npy_bytes(array: np.ndarray) -> bytes:
    import io
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array, dtype="<f4", order="C"))
    return buffer.getvalue()


def write_checkpoint(root: str, params: Mapping[str, np.ndarray | Bf16],
                     state: Mapping[str, np.ndarray] | None = None, step: int = 0,
                     source: str = "") -> str:
    """Writes a Loom checkpoint of `params` (and optimizer `state`) at
    `step` under `root` and points `root/latest` at it, each file fsynced
    and renamed into place. Returns the step directory."""
    tensors = [("param", n, v) for n, v in params.items()] + \
              [("state", n, v) for n, v in (state or {}).items()]
    files = {}
    for role, name, _ in tensors:
        if not name or any(c.isspace() or c in '"\\' or ord(c) < 32 for c in name):
            raise ValueError(f"tensor name {name!r}: Loom's names have no blanks, quotes or "
                             "control characters")
        file = _file_name(role, name)
        if file in files:
            raise ValueError(f"{role} names {files[file]!r} and {name!r} both map to {file}")
        files[file] = name
    created = not os.path.isdir(root)
    os.makedirs(root, exist_ok=True)
    if created:
        _fsync_dir(os.path.dirname(os.path.abspath(root)))
    final = os.path.join(root, f"step-{step}")
    if os.path.exists(final):
        raise FileExistsError(f"{final} exists; write the checkpoint to a new directory")
    tmp = tempfile.mkdtemp(prefix=f"step-{step}.tmp-", dir=root)
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        lines = []
        for role, name, value in tensors:
            array = value.to_float() if isinstance(value, Bf16) else \
                np.asarray(value, dtype=np.float32)
            file = _file_name(role, name)
            _write_durably(os.path.join(tmp, file), [_npy_bytes(array)])
            entry = {"name": name, "role": role, "file": file, "dtype": "f32",
                     "shape": list(array.shape)}
            # One tensor a line, as the trainer's reader takes it.
            lines.append("    " + json.dumps(entry))
        manifest = ('{\n  "format": "loom-checkpoint-1",\n'
                    f'  "step": {step},\n  "world_size": 1,\n  "zero_stage": 0,\n'
                    f'  "source": {json.dumps(source)},\n  "tensors": [\n' +
                    ",\n".join(lines) + "\n  ]\n}\n")
        _write_durably(os.path.join(tmp, "manifest.json"), [manifest.encode()])
        os.rename(tmp, final)
    except BaseException:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(root)
    _write_durably(os.path.join(root, "latest"), [f"step-{step}\n".encode()])
    return final


def read_checkpoint(root: str) -> tuple[int, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The step, parameters and optimizer state of `root`'s latest
    checkpoint (or of a step directory)."""
    directory = root
    if not os.path.exists(os.path.join(root, "manifest.json")):
        with open(os.path.join(root, "latest")) as f:
            directory = os.path.join(root, f.read().strip())
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest.get("format") != "loom-checkpoint-1":
        raise ValueError(f"{directory}: not a Loom checkpoint")
    params, state = {}, {}
    for t in manifest["tensors"]:
        array = np.load(os.path.join(directory, t["file"]))
        if list(array.shape) != list(t["shape"]):
            raise ValueError(f"{directory}/{t['file']}: shape {array.shape}, manifest {t['shape']}")
        (params if t["role"] == "param" else state)[t["name"]] = array
    return manifest["step"], params, state


def from_safetensors(path: str, root: str) -> str:
    """A Loom checkpoint (step 0, parameters only) of a .safetensors file's
    floating-point tensors, under their names; integer tensors are refused."""
    tensors, _ = read_safetensors(path)
    params = {}
    for name, value in tensors.items():
        if not isinstance(value, Bf16) and not np.issubdtype(value.dtype, np.floating):
            raise ValueError(f"{path}: tensor '{name}' is {value.dtype}; parameters are floats")
        params[name] = value
    return write_checkpoint(root, params, source=os.path.basename(path))


def from_state_dict(state_dict, root: str) -> str:
    """A Loom checkpoint (step 0, parameters only) of a PyTorch state_dict."""
    import torch
    params = {}
    for name, tensor in state_dict.items():
        tensor = tensor.detach().cpu()
        if not tensor.is_floating_point():
            raise ValueError(f"state_dict tensor '{name}' is {tensor.dtype}; parameters are floats")
        params[name] = tensor.to(torch.float32).numpy()
    return write_checkpoint(root, params, source="state_dict")


def export_safetensors(root: str, path: str, dtype: str = "F32",
                       tied: Mapping[str, str] | None = None) -> None:
    """Writes the parameters of `root`'s latest checkpoint to a
    .safetensors file under their own names, in F32 or BF16 (rounded to
    nearest even); the optimizer state is left out. `tied` maps further
    names to the parameter they share (an imported module's tied weights):
    each is written as a copy, as `save_file` of a state_dict would."""
    step, params, _ = read_checkpoint(root)
    if dtype not in ("F32", "BF16"):
        raise ValueError(f"dtype {dtype}: export writes F32 or BF16")
    for alias, holder in (tied or {}).items():
        if holder not in params:
            raise ValueError(f"tied name '{alias}' refers to '{holder}', which {root} does not hold")
        if alias in params:
            raise ValueError(f"tied name '{alias}' is also a parameter of {root}")
        params[alias] = params[holder]
    tensors = {n: Bf16.from_float(a) if dtype == "BF16" else a for n, a in params.items()}
    write_safetensors(path, tensors, metadata={"format": "pt", "loom_step": str(step)})
