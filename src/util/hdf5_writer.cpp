#include "util/hdf5_writer.h"

#include <cstring>
#include <stdexcept>

#include "util/atomic_file.h"

namespace xtrap {
namespace {
// Why the last HDF5 call failed, from its error stack: the system's words where a system call
// failed ("No space left on device"), else HDF5's innermost description. Read it right after the
// failing call: the next HDF5 call clears the stack.
std::string failureReason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
        auto& text = *static_cast<std::string*>(out);
        std::string desc = e->desc ? e->desc : "";
        size_t at = desc.find("error message = '");
        if (at != std::string::npos) {
          at += 17;
          text = desc.substr(at, desc.find('\'', at) - at);
          return 1;  // stop: the system's reason is the one to give
        }
        if (text.empty()) text = desc;
        return 0;
      },
      &reason);
  return reason.empty() ? "unknown HDF5 failure" : reason;
}
void check(herr_t status, const std::string& what, const std::string& reason) {
  if (status < 0) throw std::runtime_error("HDF5 error while writing " + what + ": " + reason);
}
hid_t checkId(hid_t id, const std::string& what) {
  if (id < 0) throw std::runtime_error("HDF5 error while creating " + what + ": " + failureReason());
  return id;
}
void writeAttribute(hid_t file, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                    const void* data) {
  hid_t space = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t attr = checkId(H5Acreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name);
  herr_t s = H5Awrite(attr, type, data);
  std::string reason = s < 0 ? failureReason() : "";
  H5Aclose(attr);
  H5Sclose(space);
  check(s, "attribute " + name, reason);
}
// float -> IEEE half, round to nearest even (for values in half's range; larger become inf).
uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));  // inf / nan
  if (exp >= 31) return uint16_t(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = (uint32_t(exp) << 10) | (mant >> 13), rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return uint16_t(sign | half);
}
}  // namespace

hid_t hdf5Float16Type() {
  static hid_t type = [] {
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    return t;
  }();
  return type;
}

Hdf5Writer::Hdf5Writer(std::filesystem::path finalPath) : final_(std::move(finalPath)) {
  auto parent = final_.parent_path().empty() ? std::filesystem::path(".") : final_.parent_path();
  if (!std::filesystem::is_directory(parent))
    throw std::runtime_error("cannot write " + final_.string() + ": directory does not exist");
  removeStaleTemporariesOf(final_);
  tmp_ = temporarySibling(final_);
  // When a write fails (disk full), H5Fclose cannot flush and leaves the file open; HDF5 1.10's
  // atexit handler then closes it again and crashes. An uncommitted file is deleted anyway, so
  // skip that handler (this must precede any other HDF5 call; later calls are harmless no-ops).
  H5dont_atexit();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become exceptions, not stderr dumps
  file_ = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) {
    std::string reason = failureReason();
    std::error_code ignored;
    std::filesystem::remove(tmp_, ignored);  // a failed create may leave an empty file; no destructor runs
    throw std::runtime_error("cannot write " + final_.string() + ": " + reason);
  }
}

Hdf5Writer::~Hdf5Writer() {
  if (committed_) return;
  if (file_ >= 0) H5Fclose(file_);
  std::error_code ignored;
  std::filesystem::remove(tmp_, ignored);
}

void Hdf5Writer::attribute(const std::string& name, const std::string& value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, std::max<size_t>(1, value.size()));
  H5Tset_cset(type, H5T_CSET_UTF8);
  writeAttribute(file_, name, type, {}, value.empty() ? " " : value.c_str());
  H5Tclose(type);
}
void Hdf5Writer::attribute(const std::string& name, double value) {
  writeAttribute(file_, name, H5T_NATIVE_DOUBLE, {}, &value);
}
void Hdf5Writer::attribute(const std::string& name, int64_t value) {
  writeAttribute(file_, name, H5T_NATIVE_INT64, {}, &value);
}
void Hdf5Writer::attribute(const std::string& name, const std::vector<double>& values) {
  writeAttribute(file_, name, H5T_NATIVE_DOUBLE, {hsize_t(values.size())}, values.data());
}

void Hdf5Writer::group(const std::string& path) {
  hid_t g = checkId(H5Gcreate2(file_, path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group " + path);
  H5Gclose(g);
}

namespace {
void writeDataset(hid_t file, const std::string& path, hid_t type, const std::vector<hsize_t>& dims, const void* data) {
  hid_t space = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t ds =
      checkId(H5Dcreate2(file, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "dataset " + path);
  herr_t s = H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  std::string reason = s < 0 ? failureReason() : "";
  H5Dclose(ds);
  H5Sclose(space);
  check(s, "dataset " + path, reason);
}
}  // namespace

void Hdf5Writer::floats(const std::string& path, const std::vector<hsize_t>& dims, const float* data) {
  writeDataset(file_, path, H5T_NATIVE_FLOAT, dims, data);
}
void Hdf5Writer::ints(const std::string& path, const std::vector<hsize_t>& dims, const int32_t* data) {
  writeDataset(file_, path, H5T_NATIVE_INT32, dims, data);
}
void Hdf5Writer::strings(const std::string& path, const std::vector<std::string>& values) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  writeDataset(file_, path, type, {hsize_t(values.size())}, ptrs.data());
  H5Tclose(type);
}

hid_t Hdf5Writer::createRowChunked(const std::string& path, hsize_t A, hsize_t N, hsize_t M, hsize_t rowChunk,
                                   StoredFloat stored) {
  hsize_t dims[3] = {A, N, M};
  hsize_t chunk[3] = {1, std::max<hsize_t>(1, std::min(rowChunk, N)), std::max<hsize_t>(1, M)};
  hid_t space = H5Screate_simple(3, dims, nullptr);
  hid_t props = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(props, 3, chunk);
  H5Pset_shuffle(props);
  H5Pset_deflate(props, 4);
  hid_t type = stored == StoredFloat::Float16 ? hdf5Float16Type() : H5T_IEEE_F32LE;
  hid_t ds = H5Dcreate2(file_, path.c_str(), type, space, H5P_DEFAULT, props, H5P_DEFAULT);
  std::string reason = ds < 0 ? failureReason() : "";
  H5Pclose(props);
  H5Sclose(space);
  if (ds < 0) throw std::runtime_error("HDF5 error while creating dataset " + path + ": " + reason);
  return ds;
}

void Hdf5Writer::writeRows(hid_t ds, hsize_t A, hsize_t row0, hsize_t rows, hsize_t M, const float* data) {
  hsize_t start[3] = {0, row0, 0}, count[3] = {A, rows, M};
  hid_t fileSpace = H5Dget_space(ds);
  H5Sselect_hyperslab(fileSpace, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t memSpace = H5Screate_simple(3, count, nullptr);
  hid_t type = H5Dget_type(ds);
  herr_t s;
  if (H5Tget_size(type) == 2) {
    std::vector<uint16_t> half(A * rows * M);
    for (size_t i = 0; i < half.size(); ++i) half[i] = toHalf(data[i]);
    s = H5Dwrite(ds, hdf5Float16Type(), memSpace, fileSpace, H5P_DEFAULT, half.data());
  } else {
    s = H5Dwrite(ds, H5T_NATIVE_FLOAT, memSpace, fileSpace, H5P_DEFAULT, data);
  }
  std::string reason = s < 0 ? failureReason() : "";
  H5Tclose(type);
  H5Sclose(memSpace);
  H5Sclose(fileSpace);
  check(s, "rows of " + final_.string(), reason);
}

void Hdf5Writer::closeDataset(hid_t ds) { H5Dclose(ds); }

void Hdf5Writer::commit() {
  if (H5Fclose(file_) < 0) {
    file_ = -1;
    throw std::runtime_error("cannot write " + final_.string() + ": " + failureReason());
  }
  file_ = -1;
  commitTemporary(tmp_, final_);
  committed_ = true;
}

}  // namespace xtrap
