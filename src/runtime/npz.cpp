#include "runtime/npz.h"

#include <zlib.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace isomer::runtime {

namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
const NpyType kTypes[] = {
    {"<f4", DType::Float32}, {"<f8", DType::Float64}, {"<f2", DType::Float16}, {"<i8", DType::Int64},
    {"<i4", DType::Int32},   {"<i2", DType::Int16},   {"|i1", DType::Int8},    {"|u1", DType::UInt8},
    {"<u2", DType::UInt16},  {"<u4", DType::UInt32},  {"<u8", DType::UInt64},  {"|b1", DType::Bool},
};

uint32_t u32(const std::string& b, size_t at) {
  require(at + 4 <= b.size(), "truncated archive");
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint16_t u16(const std::string& b, size_t at) {
  require(at + 2 <= b.size(), "truncated archive");
  uint16_t v;
  std::memcpy(&v, b.data() + at, 2);
  return v;
}
uint64_t u64(const std::string& b, size_t at) {
  require(at + 8 <= b.size(), "truncated archive");
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

void put16(std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); }
void put32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }

std::string inflate_raw(const std::string& in, size_t out_size) {
  std::string out(out_size, '\0');
  z_stream z{};
  require(inflateInit2(&z, -MAX_WBITS) == Z_OK, "zlib init failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  require(rc == Z_STREAM_END, "corrupt compressed entry");
  return out;
}

// An array numpy stored column-major (np.asfortranarray, fortran_order True) in row-major
// order: the bytes of element (i0, ..., in) sit where the reversed dims put them.
Tensor from_fortran_order(const Tensor& t) {
  const std::vector<int64_t>& dims = t.dims();
  const size_t esize = dtype_size(t.dtype()), n = static_cast<size_t>(num_elements(dims));
  std::string out(t.bytes().size(), '\0');
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t c = 0; c < n; ++c) {
    size_t f = 0;  // the column-major offset of the row-major index `idx`
    for (size_t k = dims.size(); k-- > 0;) f = f * static_cast<size_t>(dims[k]) + static_cast<size_t>(idx[k]);
    std::memcpy(out.data() + c * esize, t.bytes().data() + f * esize, esize);
    for (size_t k = dims.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
    }
  }
  return Tensor(t.dtype(), dims, std::move(out));
}

}  // namespace

std::string encode_npy(const Tensor& t) {
  // .npy has no bfloat16 (numpy writes ml_dtypes' as raw '<V2' void, which loses the
  // type): a bf16 array is written as float32, which holds every bf16 value exactly.
  if (t.dtype() == DType::BFloat16) return encode_npy(Tensor::from_f64(DType::Float32, t.dims(), t.to_f64()));
  const char* descr = nullptr;
  for (const NpyType& k : kTypes)
    if (k.dtype == t.dtype()) descr = k.descr;
  require(descr != nullptr, "type " + std::string(dtype_name(t.dtype())) + " cannot be written to .npy");
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.dims().size(); ++i) h << t.dims()[i] << (t.dims().size() == 1 ? "," : i + 1 < t.dims().size() ? ", " : "");
  h << "), }";
  std::string header = h.str();
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  put16(out, static_cast<uint16_t>(header.size()));
  out += header;
  out += t.bytes();
  return out;
}

Tensor decode_npy(const std::string& b, const std::string& what) {
  require(b.size() >= 10 && b.compare(0, 6, "\x93NUMPY") == 0, what + " is not a .npy array");
  int major = static_cast<unsigned char>(b[6]);
  size_t hlen = major == 1 ? u16(b, 8) : u32(b, 8);
  size_t start = major == 1 ? 10 : 12;
  require(start + hlen <= b.size(), what + ": truncated .npy header");
  std::string header = b.substr(start, hlen);
  auto field = [&](const std::string& key) {
    size_t p = header.find("'" + key + "'");
    require(p != std::string::npos, what + ": .npy header lacks '" + key + "'");
    p = header.find(':', p);
    return header.substr(p + 1);
  };
  std::string d = field("descr");
  size_t q = d.find('\'');
  std::string descr = d.substr(q + 1, d.find('\'', q + 1) - q - 1);
  DType dtype = DType::Undefined;
  for (const NpyType& k : kTypes)
    if (descr == k.descr || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(k.descr).substr(1)))
      dtype = k.dtype;
  require(dtype != DType::Undefined, what + ": unsupported .npy type '" + descr + "'");
  const bool fortran = field("fortran_order").find("True") < field("fortran_order").find("False");
  std::string s = field("shape");
  require(s.find('(') != std::string::npos && s.find(')') > s.find('('), what + ": .npy header has no shape tuple");
  s = s.substr(s.find('(') + 1, s.find(')') - s.find('(') - 1);
  std::vector<int64_t> dims;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t first = item.find_first_not_of(' '), last = item.find_last_not_of(' ');
    if (first == std::string::npos) continue;
    int64_t d = -1;
    const auto [end, ec] = std::from_chars(item.data() + first, item.data() + last + 1, d);
    require(ec == std::errc() && end == item.data() + last + 1 && d >= 0,
            what + ": .npy shape entry '" + item.substr(first, last + 1 - first) + "' is not a dimension");
    dims.push_back(d);
  }
  const size_t bytes = static_cast<size_t>(checked_num_bytes(dims, dtype_size(dtype), what + ": .npy shape"));
  require(b.size() - start - hlen >= bytes, what + ": .npy data is truncated");
  Tensor t(dtype, dims, b.substr(start + hlen, bytes));
  return fortran ? from_fortran_order(t) : t;
}

NamedTensors read_npz(const std::string& path) {
  // A directory, FIFO or device is refused before it is opened: a FIFO would block forever.
  std::error_code ec;
  const auto type = std::filesystem::status(path, ec).type();
  require(type != std::filesystem::file_type::not_found, "cannot read '" + path + "' (no such file)");
  require(type == std::filesystem::file_type::regular || ec, "cannot read '" + path + "' (not a regular file)");
  std::ifstream f(path, std::ios::binary);
  require(f.good(), "cannot read '" + path + "'");
  std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  try {
    // End of central directory, then the zip64 one where sizes overflow.
    require(b.size() >= 22, "not a zip archive");
    size_t eocd = std::string::npos;
    for (size_t p = b.size() - 22 + 1; p-- > 0 && b.size() - p < 22 + 65536;)
      if (u32(b, p) == 0x06054b50) {
        eocd = p;
        break;
      }
    require(eocd != std::string::npos, "not a zip archive");
    uint64_t entries = u16(b, eocd + 10), cd = u32(b, eocd + 16);
    if ((entries == 0xFFFF || cd == 0xFFFFFFFF) && eocd >= 20 && u32(b, eocd - 20) == 0x07064b50) {
      uint64_t z64 = u64(b, eocd - 20 + 8);
      entries = u64(b, z64 + 32);
      cd = u64(b, z64 + 48);
    }
    NamedTensors out;
    size_t p = cd;
    for (uint64_t e = 0; e < entries; ++e) {
      require(u32(b, p) == 0x02014b50, "corrupt central directory");
      uint16_t method = u16(b, p + 10);
      uint64_t csize = u32(b, p + 20), usize = u32(b, p + 24);
      uint16_t nlen = u16(b, p + 28), xlen = u16(b, p + 30), clen = u16(b, p + 32);
      uint64_t local = u32(b, p + 42);
      std::string name = b.substr(p + 46, nlen);
      // Zip64 extra field: the 0xFFFFFFFF fields, in order.
      for (size_t x = p + 46 + nlen; x + 4 <= p + 46 + nlen + xlen;) {
        uint16_t id = u16(b, x), len = u16(b, x + 2);
        if (id == 1) {
          size_t at = x + 4;
          if (usize == 0xFFFFFFFF) usize = u64(b, at), at += 8;
          if (csize == 0xFFFFFFFF) csize = u64(b, at), at += 8;
          if (local == 0xFFFFFFFF) local = u64(b, at);
        }
        x += 4 + len;
      }
      p += 46 + nlen + xlen + clen;
      require(u32(b, local) == 0x04034b50, "corrupt entry '" + name + "'");
      size_t data = local + 30 + u16(b, local + 26) + u16(b, local + 28);
      require(data + csize <= b.size(), "truncated entry '" + name + "'");
      std::string raw = b.substr(data, csize);
      // Deflate expands at most about 1032 to 1: a larger stated size is a lie that would
      // allocate gigabytes before zlib finds the entry short.
      require(method != 8 || usize <= csize * 1032 + 1024,
              "entry '" + name + "' claims " + std::to_string(usize) + " bytes from " + std::to_string(csize) +
                  " compressed");
      if (method == 8) raw = inflate_raw(raw, usize);
      else require(method == 0, "entry '" + name + "' uses an unsupported compression method");
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
      out.emplace_back(name, decode_npy(raw, "array '" + name + "'"));
    }
    return out;
  } catch (const Error& e) {
    throw Error("'" + path + "': " + e.what());
  }
}

void write_npz(const std::string& path, const NamedTensors& arrays) {
  std::string out, central;
  for (const auto& [name, t] : arrays) {
    std::string data = encode_npy(t);
    std::string fname = name + ".npy";
    require(data.size() < 0xFFFFFFFFull, "array '" + name + "' is too large for this writer");
    uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    uint32_t offset = static_cast<uint32_t>(out.size());
    auto header = [&](std::string& s, bool central_entry) {
      put32(s, central_entry ? 0x02014b50 : 0x04034b50);
      if (central_entry) put16(s, 20);
      put16(s, 20);  // version needed
      put16(s, 0);   // flags
      put16(s, 0);   // stored
      put16(s, 0);   // time
      put16(s, 0x21);  // date (1980-01-01)
      put32(s, crc);
      put32(s, static_cast<uint32_t>(data.size()));
      put32(s, static_cast<uint32_t>(data.size()));
      put16(s, static_cast<uint16_t>(fname.size()));
      put16(s, 0);  // extra
      if (central_entry) {
        put16(s, 0);  // comment
        put16(s, 0);  // disk
        put16(s, 0);  // internal attributes
        put32(s, 0);  // external attributes
        put32(s, offset);
      }
      s += fname;
    };
    header(out, false);
    out += data;
    header(central, true);
  }
  uint32_t cd_offset = static_cast<uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint16_t>(arrays.size()));
  put16(out, static_cast<uint16_t>(arrays.size()));
  put32(out, static_cast<uint32_t>(central.size()));
  put32(out, cd_offset);
  put16(out, 0);
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    require(f.good(), "cannot write '" + path + "'");
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    require(f.good(), "cannot write '" + path + "'");
  }
  require(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot write '" + path + "'");
}

}  // namespace isomer::runtime
