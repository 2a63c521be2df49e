#pragma once
// A small RAII layer over the HDF5 C API for xtrap's dumps. The file is created under a
// temporary name and renamed by commit(); destroying an uncommitted writer deletes it, so an
// interrupted dump never leaves a file that looks valid.
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace xtrap {

enum class StoredFloat { Float32, Float16 };

class Hdf5Writer {
 public:
  explicit Hdf5Writer(std::filesystem::path finalPath);
  ~Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  void attribute(const std::string& name, const std::string& value);  // root attributes
  void attribute(const std::string& name, double value);
  void attribute(const std::string& name, int64_t value);
  void attribute(const std::string& name, const std::vector<double>& values);

  void group(const std::string& path);
  void floats(const std::string& path, const std::vector<hsize_t>& dims, const float* data);
  void ints(const std::string& path, const std::vector<hsize_t>& dims, const int32_t* data);
  void strings(const std::string& path, const std::vector<std::string>& values);

  // A 3-D dataset [A, N, M] chunked by (1, rowChunk, M), gzip-compressed, filled by writeRows.
  hid_t createRowChunked(const std::string& path, hsize_t A, hsize_t N, hsize_t M, hsize_t rowChunk,
                         StoredFloat stored);
  // Writes rows [row0, row0 + rows) of all A slices from float32 data (A, rows, M), converting
  // to the dataset's stored type.
  void writeRows(hid_t dataset, hsize_t A, hsize_t row0, hsize_t rows, hsize_t M, const float* data);
  void closeDataset(hid_t dataset);

  void commit();  // close and rename to the final path

 private:
  std::filesystem::path final_, tmp_;
  hid_t file_ = -1;
  bool committed_ = false;
};

// The IEEE half type as an HDF5 type (HDF5 1.10 has no predefined one; h5py reads it as float16).
hid_t hdf5Float16Type();

}  // namespace xtrap
