#pragma once
// The position methods xtrap knows, and which of them are the ALiBi family (one LinearBiasSpec).
#include <string>
#include <vector>

namespace xtrap {

enum class PositionMethod {
  None,           // causal mask only (decoders) / nothing (encoders)
  Sinusoidal,     // fixed sin/cos added to the input embeddings
  Learned,        // learned absolute embeddings, a table of max_positions rows
  Rotary,         // RoPE on queries and keys
  T5,             // T5's bucketed relative bias, learned per head
  Alibi,          // causal in decoders, symmetric -m|i-j| in encoders
  AlibiOffset,    // past -m(i-j), future -m(j-i-0.5)
  AlibiOneSided,  // half the heads see only the past, half only the future
  AlibiLearned,   // learned past/future slopes (sigmoid-parameterised)
  BiAlibi,        // learned past/future slopes + learned first-token bias (LittleBird)
  KerpleLog,      // KERPLE's logarithmic kernel -r1 log(1 + r2 |i-j|), r1, r2 learned per head
  Fire,           // FIRE: a learned MLP of the log-transformed, progressively interpolated distance
};

PositionMethod parsePositionMethod(const std::string& name);  // throws listing valid names
std::string positionMethodName(PositionMethod m);
const std::vector<std::string>& positionMethodNames();
bool isLinearBias(PositionMethod m);  // the ALiBi family

}  // namespace xtrap
