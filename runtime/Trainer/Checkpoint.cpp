//===- Checkpoint.cpp - .npy files and checkpoint manifests ---------------===//

#include "Checkpoint.h"
#include "loom/Runtime/DurableFile.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace loom::runtime;

static int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

static std::string shapeTuple(const std::vector<int64_t> &shape) {
  std::string text = "(";
  for (int64_t d : shape)
    text += std::to_string(d) + ", ";
  if (shape.size() > 1)
    text.resize(text.size() - 1), text.back() = ')';
  else if (shape.size() == 1)
    text.resize(text.size() - 1), text += ")";
  else
    text += ")";
  return text;
}

std::string loom::runtime::writeNpyF32(const std::string &path,
                                       const std::vector<int64_t> &shape,
                                       const float *data) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " +
                       shapeTuple(shape) + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n', to 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  DurableFile out(path);
  uint16_t length = uint16_t(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(&length, 2);
  out.write(header);
  out.write(data, size_t(count(shape)) * 4);
  return out.commit();
}

std::string loom::runtime::readNpyF32(const std::string &path,
                                      const std::vector<int64_t> &shape,
                                      std::vector<float> &data) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "cannot read " + path;
  char magic[8];
  uint16_t length = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY\x01", 7) != 0 ||
      !in.read(reinterpret_cast<char *>(&length), 2))
    return path + " is not a .npy file (version 1)";
  std::string header(length, '\0');
  if (!in.read(header.data(), length))
    return path + ": truncated header";
  if (header.find("'descr': '<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos)
    return path + ": expected a C-order little-endian f32 array";
  if (header.find("'shape': " + shapeTuple(shape)) == std::string::npos)
    return path + ": expected shape " + shapeTuple(shape) + ", header is " +
           header.substr(0, header.find('}') + 1);
  data.resize(count(shape));
  if (!in.read(reinterpret_cast<char *>(data.data()), data.size() * 4))
    return path + ": truncated data (expected " +
           std::to_string(data.size() * 4) + " bytes)";
  if (in.peek() != EOF)
    return path + ": trailing bytes after the data";
  return "";
}

std::string loom::runtime::writeManifest(const std::string &path,
                                         const CheckpointManifest &m) {
  std::ostringstream out;
  out << "{\n  \"format\": \"loom-checkpoint-1\",\n  \"step\": " << m.step
      << ",\n  \"world_size\": " << m.worldSize
      << ",\n  \"zero_stage\": " << m.zeroStage << ",\n  \"source\": \""
      << m.source << "\",\n  \"tensors\": [\n";
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const CheckpointTensor &t = m.tensors[i];
    out << "    {\"name\": \"" << t.name << "\", \"role\": \"" << t.role
        << "\", \"file\": \"" << t.file << "\", \"dtype\": \"f32\", "
        << "\"shape\": [";
    for (size_t d = 0; d < t.shape.size(); ++d)
      out << (d ? ", " : "") << t.shape[d];
    out << "]}" << (i + 1 < m.tensors.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  return writeFileDurably(path, out.str());
}

/// The value of `"key": ` on `line`, up to the next ',' or '}' (quotes
/// stripped), or nullopt.
static bool field(const std::string &line, const std::string &key,
                  std::string &value) {
  std::string needle = "\"" + key + "\": ";
  size_t at = line.find(needle);
  if (at == std::string::npos)
    return false;
  at += needle.size();
  if (line[at] == '"') {
    size_t end = line.find('"', at + 1);
    if (end == std::string::npos)
      return false;
    value = line.substr(at + 1, end - at - 1);
    return true;
  }
  if (line[at] == '[') {
    size_t end = line.find(']', at);
    if (end == std::string::npos)
      return false;
    value = line.substr(at + 1, end - at - 1);
    return true;
  }
  size_t end = line.find_first_of(",}", at);
  value = line.substr(at, end == std::string::npos ? end : end - at);
  return true;
}

/// Parses a whole decimal integer (spaces around allowed).
static bool parseInt(const std::string &text, int64_t &value) {
  const char *begin = text.c_str();
  char *end = nullptr;
  value = std::strtoll(begin, &end, 10);
  if (end == begin)
    return false;
  while (*end == ' ')
    ++end;
  return *end == '\0';
}

std::string loom::runtime::readManifest(const std::string &path,
                                        CheckpointManifest &m) {
  std::ifstream in(path);
  if (!in)
    return "cannot read " + path;
  std::string line, value;
  bool format = false, step = false;
  std::string corrupt = path + ": corrupt manifest line: ";
  while (std::getline(in, line)) {
    if (line.find("\"name\"") != std::string::npos) {
      CheckpointTensor t;
      std::string shape;
      if (!field(line, "name", t.name) || !field(line, "role", t.role) ||
          !field(line, "file", t.file) || !field(line, "shape", shape))
        return corrupt + line;
      std::stringstream dims(shape);
      std::string dim;
      while (std::getline(dims, dim, ',')) {
        int64_t d;
        if (!parseInt(dim, d) || d < 0)
          return corrupt + line;
        t.shape.push_back(d);
      }
      m.tensors.push_back(t);
    } else if (field(line, "format", value)) {
      format = value == "loom-checkpoint-1";
    } else if (field(line, "step", value)) {
      if (!parseInt(value, m.step))
        return corrupt + line;
      step = true;
    } else if (field(line, "world_size", value)) {
      if (!parseInt(value, m.worldSize))
        return corrupt + line;
    } else if (field(line, "zero_stage", value)) {
      if (!parseInt(value, m.zeroStage))
        return corrupt + line;
    } else if (field(line, "source", value)) {
      m.source = value;
    }
  }
  if (!format || !step)
    return path + ": not a Loom checkpoint manifest (format or step missing)";
  return "";
}
