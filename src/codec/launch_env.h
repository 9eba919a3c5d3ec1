// Whether the codecs' kernels use programmatic dependent launch (docs/kernels/fp8.md and
// docs/kernels/lossless.md, "Small messages and programmatic dependent launch"): the fp8 sampling
// kernels' chain and the encode after it, the fp8 one-pass encode and decode, and the lossless
// version-2 encode and decode, each after whatever kernel precedes it in the stream.
// Such a kernel may start while the one before it runs, and waits (griddepcontrol) before it
// touches global memory. The frames are the same either way; only the launch latency between
// kernels differs.
// CCLZ_PDL (read once per process): 1 (default) uses it where the device has it (sm_90 and
// later), 0 never does (to compare, or to rule it out when looking for a fault).
#pragma once

namespace cclz {

// Parses CCLZ_PDL's value (NULL or empty: the default, 1); throws cclzInvalidArgument on
// anything else.
bool parseProgrammaticLaunch(const char* value);

// The environment's choice, parsed once (an invalid value fails every call that asks).
bool programmaticLaunchFromEnvironment();

}  // namespace cclz
