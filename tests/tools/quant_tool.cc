// quant_tool: a test-only driver that exposes the scalar quantizer (quant/rtn.h) and the float
// conversions (tensor/float_convert.h) over raw little-endian files, so that
// tests/python/test_quant_interop.py can compare them bit for bit with compressed-tensors and
// torch.
//
//   quant_tool quantize DTYPE ROWS COLS BITS sym|asym GROUP WEIGHT OUT_PREFIX
//       WEIGHT: ROWS x COLS values of DTYPE (BF16|F16|F32); GROUP: a positive size or -1 (channel).
//       Writes OUT_PREFIX.packed (int32 [rows, words]), .scales (DTYPE [rows, groups]),
//       .deq (DTYPE [rows, cols]) and, for asym, .zp (int32 [rows, groups], unpacked) and
//       .zp_packed (int32 [ceil(rows*bits/32), groups]).
//   quant_tool pack BITS ROWS COLS IN_INT8 OUT_INT32      PackRow on each row
//   quant_tool pack-zp BITS ROWS COLS IN_INT32 OUT_INT32  PackZeroPoints
//   quant_tool convert DTYPE IN_F32 OUT                   ConvertFromFloat
// Exit status: 0 ok, 2 bad arguments or input (message on stderr), 3 file errors.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "quant/params.h"
#include "quant/rtn.h"
#include "tensor/dtype.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

Result<std::vector<uint8_t>> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

Status WriteFile(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

template <typename T>
Status WriteVector(const std::string& path, const std::vector<T>& v) {
  return WriteFile(path, v.data(), v.size() * sizeof(T));
}

Result<int64_t> ParseInt(const std::string& s) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size()) return static_cast<int64_t>(v);
  } catch (...) {
  }
  return Status::Usage("not an integer: " + s);
}

Result<DType> ParseFloatDType(const std::string& s) {
  const auto dtype = DTypeFromName(s);
  if (!dtype || !IsQuantizableFloat(*dtype)) return Status::Usage("dtype must be BF16, F16 or F32");
  return *dtype;
}

Status CheckSize(const std::vector<uint8_t>& data, size_t want, const std::string& path) {
  if (data.size() != want) {
    return Status::InvalidInput(path + " holds " + std::to_string(data.size()) +
                                " bytes, expected " + std::to_string(want));
  }
  return Status::Ok();
}

Status Quantize(const std::vector<std::string>& a) {
  if (a.size() != 8)
    return Status::Usage("quantize DTYPE ROWS COLS BITS sym|asym GROUP WEIGHT OUT");
  SPK_ASSIGN_OR_RETURN(const DType dtype, ParseFloatDType(a[0]));
  SPK_ASSIGN_OR_RETURN(const int64_t rows, ParseInt(a[1]));
  SPK_ASSIGN_OR_RETURN(const int64_t cols, ParseInt(a[2]));
  SPK_ASSIGN_OR_RETURN(const int64_t bits, ParseInt(a[3]));
  SPK_ASSIGN_OR_RETURN(const int64_t group, ParseInt(a[5]));
  if (a[4] != "sym" && a[4] != "asym") return Status::Usage("symmetry must be sym or asym");
  const QuantParams p{
      .bits = static_cast<int>(bits), .symmetric = a[4] == "sym", .group_size = group};
  SPK_RETURN_IF_ERROR(ValidateParams(p));
  if (rows <= 0 || !GroupFits(cols, group)) return Status::Usage("bad rows/cols/group");
  const size_t elem = DTypeBits(dtype) / 8;
  SPK_ASSIGN_OR_RETURN(const std::vector<uint8_t> weight, ReadFile(a[6]));
  SPK_RETURN_IF_ERROR(CheckSize(weight, static_cast<size_t>(rows * cols) * elem, a[6]));

  const int64_t groups = GroupsPerRow(cols, group);
  std::vector<int32_t> packed(rows * PackedWords(cols, p.bits));
  std::vector<uint8_t> scales(rows * groups * elem);
  std::vector<int32_t> zero_points(rows * groups);
  SPK_RETURN_IF_ERROR(
      QuantizeRowsRtn(p, dtype, weight.data(), rows, cols,
                      {packed.data(), scales.data(), p.symmetric ? nullptr : zero_points.data()}));
  std::vector<uint8_t> deq(weight.size());
  SPK_RETURN_IF_ERROR(DequantizeRows(p, dtype, packed.data(), scales.data(),
                                     p.symmetric ? nullptr : zero_points.data(), rows, cols,
                                     deq.data()));
  const std::string& out = a[7];
  SPK_RETURN_IF_ERROR(WriteVector(out + ".packed", packed));
  SPK_RETURN_IF_ERROR(WriteVector(out + ".scales", scales));
  SPK_RETURN_IF_ERROR(WriteVector(out + ".deq", deq));
  if (!p.symmetric) {
    std::vector<int32_t> zp_packed(PackedWords(rows, p.bits) * groups);
    PackZeroPoints(p.bits, zero_points.data(), rows, groups, zp_packed.data());
    SPK_RETURN_IF_ERROR(WriteVector(out + ".zp", zero_points));
    SPK_RETURN_IF_ERROR(WriteVector(out + ".zp_packed", zp_packed));
  }
  return Status::Ok();
}

Status Pack(const std::vector<std::string>& a, bool zero_points) {
  if (a.size() != 5) return Status::Usage("pack|pack-zp BITS ROWS COLS IN OUT");
  SPK_ASSIGN_OR_RETURN(const int64_t bits, ParseInt(a[0]));
  SPK_ASSIGN_OR_RETURN(const int64_t rows, ParseInt(a[1]));
  SPK_ASSIGN_OR_RETURN(const int64_t cols, ParseInt(a[2]));
  if (bits < 1 || bits > 8 || rows <= 0 || cols <= 0) return Status::Usage("bad bits/rows/cols");
  SPK_ASSIGN_OR_RETURN(const std::vector<uint8_t> in, ReadFile(a[3]));
  const int b = static_cast<int>(bits);
  std::vector<int32_t> out;
  if (zero_points) {
    SPK_RETURN_IF_ERROR(CheckSize(in, rows * cols * sizeof(int32_t), a[3]));
    std::vector<int32_t> zp(rows * cols);
    std::memcpy(zp.data(), in.data(), in.size());
    for (int32_t v : zp) {
      if (v < QMin(b) || v > QMax(b)) return Status::InvalidInput("zero point out of range");
    }
    out.resize(PackedWords(rows, b) * cols);
    PackZeroPoints(b, zp.data(), rows, cols, out.data());
  } else {
    SPK_RETURN_IF_ERROR(CheckSize(in, rows * cols, a[3]));
    const int64_t words = PackedWords(cols, b);
    out.resize(rows * words);
    for (int64_t r = 0; r < rows; ++r) {
      const std::span<const int8_t> q(reinterpret_cast<const int8_t*>(in.data()) + r * cols,
                                      static_cast<size_t>(cols));
      for (int8_t v : q) {
        if (v < QMin(b) || v > QMax(b)) return Status::InvalidInput("value out of range");
      }
      PackRow(b, q, std::span(out).subspan(r * words, words));
    }
  }
  return WriteVector(a[4], out);
}

Status Convert(const std::vector<std::string>& a) {
  if (a.size() != 3) return Status::Usage("convert DTYPE IN_F32 OUT");
  SPK_ASSIGN_OR_RETURN(const DType dtype, ParseFloatDType(a[0]));
  SPK_ASSIGN_OR_RETURN(const std::vector<uint8_t> in, ReadFile(a[1]));
  if (in.size() % 4 != 0) return Status::InvalidInput("F32 input size is not a multiple of 4");
  const size_t n = in.size() / 4;
  std::vector<float> values(n);
  ConvertToFloat(DType::kF32, in.data(), values.data(), n);
  std::vector<uint8_t> out(n * DTypeBits(dtype) / 8);
  ConvertFromFloat(dtype, values.data(), out.data(), n);
  return WriteVector(a[2], out);
}

Status Run(int argc, char** argv) {
  if (argc < 2) return Status::Usage("usage: quant_tool quantize|pack|pack-zp|convert ARGS...");
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "quantize") return Quantize(args);
  if (command == "pack") return Pack(args, /*zero_points=*/false);
  if (command == "pack-zp") return Pack(args, /*zero_points=*/true);
  if (command == "convert") return Convert(args);
  return Status::Usage("unknown command " + command);
}

}  // namespace
}  // namespace spk

int main(int argc, char** argv) {
  const spk::Status status = spk::Run(argc, argv);
  if (!status.ok()) {
    std::cerr << "quant_tool: " << status.ToString() << "\n";
    return spk::ExitCodeFor(status);
  }
  return 0;
}
