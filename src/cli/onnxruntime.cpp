#include "cli/onnxruntime.h"

#include "bridge/bridge.h"

namespace isomer::cli {

namespace {

// A bridge session freed when it goes out of scope.
struct ScopedSession {
  std::shared_ptr<bridge::OrtBridge> ort;
  bridge::Session s;
  ~ScopedSession() {
    try {
      if (s.id >= 0) ort->free(s.id);
    } catch (const Error&) {  // the helper is gone: nothing left to free
    }
  }
};

}  // namespace

OrtResult run_onnxruntime(const OrtRequest& r) {
  auto ort = bridge::OrtBridge::shared();
  ScopedSession timed{ort, ort->load_file(r.model, {.threads = r.threads, .optimization = "all"})};
  OrtResult out;
  out.version = ort->version();
  if (r.reference_outputs || r.plain_outputs_too) {
    ScopedSession plain{ort, ort->load_file(r.model, {.threads = r.threads, .optimization = "none"})};
    (r.reference_outputs ? out.outputs : out.plain_outputs) = ort->run(plain.s.id, r.inputs);
  }
  if (!r.reference_outputs) out.outputs = ort->run(timed.s.id, r.inputs);
  if (r.bench) out.ms = ort->time(timed.s.id, r.inputs, r.warmup, r.repeat);
  return out;
}

}  // namespace isomer::cli
