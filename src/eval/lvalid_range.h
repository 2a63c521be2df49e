#pragma once
// --Lvalid grammar: comma-separated items, each one of
//   N          a single length
//   A..B       A, 2A, 4A, ... and B (geometric doubling; B always included)
//   A..B*f     A, A*f, A*f^2, ... and B (geometric factor f > 1, rounded to integers)
//   A..B:s     A, A+s, A+2s, ... and B (linear step s)
// The result is sorted and de-duplicated. Malformed, non-positive, descending or absurd
// (> 16,777,216) input throws std::invalid_argument quoting the bad item.
#include <cstdint>
#include <string>
#include <vector>

namespace xtrap {

constexpr int64_t kMaxLvalid = 16777216;

std::vector<int64_t> parseLvalidRange(const std::string& spec);

// The comma-separated items of a range list (--Lvalid, --depths); an empty item is an error
// "bad OPTION item 'SPEC': empty item".
std::vector<std::string> rangeItems(const std::string& spec, const std::string& option);

}  // namespace xtrap
