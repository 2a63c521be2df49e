#pragma once
// --depths grammar (retrieval): where in the prompt the answer sits, in whole percent, as a comma
// list of items, each N or A..B:s (A, A+s, ... and B). Sorted, de-duplicated; every value in
// [0, 100]. Malformed input throws std::invalid_argument quoting the bad item.
#include <string>
#include <vector>

namespace xtrap {

std::vector<double> parseDepthList(const std::string& spec);

}  // namespace xtrap
