// The C ABI (client/neffclient.h) over CacheClient.
#include "client/neffclient.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "client/cache_client.h"
#include "client/torchneuron_key.h"

struct neff_client {
  std::unique_ptr<neffd::CacheClient> impl;
};

namespace {

thread_local std::string last_error;

// What a C compile callback reported, beyond its return code.
struct JobState {
  std::string log;
};

neff_status Fail(neff_status status, const absl::Status& why) {
  last_error = std::string(why.message());
  return status;
}

neff_status FromStatus(const absl::Status& status) {
  if (status.ok()) return NEFF_OK;
  if (absl::IsInvalidArgument(status)) {
    return Fail(NEFF_INVALID_ARGUMENT, status);
  }
  if (neffd::IsCompileFailure(status)) return Fail(NEFF_COMPILE_FAILED, status);
  if (absl::IsCancelled(status)) return Fail(NEFF_CANCELLED, status);
  return Fail(NEFF_ERROR, status);
}

char* Dup(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

const char* OrEmpty(const char* s) { return s != nullptr ? s : ""; }

bool Missing(const void* p, const char* what, neff_status* status) {
  if (p != nullptr) return false;
  *status = Fail(NEFF_INVALID_ARGUMENT,
                 absl::InvalidArgumentError(std::string(what) + ": is NULL"));
  return true;
}

}  // namespace

extern "C" {

void neff_compile_set_log(const neff_compile_job* job, const char* log) {
  if (job != nullptr && job->internal != nullptr) {
    static_cast<JobState*>(job->internal)->log = OrEmpty(log);
  }
}

neff_status neff_client_new(const char* address, neff_client** out) {
  return neff_client_new_tls(address, nullptr, nullptr, nullptr, out);
}

neff_status neff_client_new_tls(const char* address, const char* tls_ca,
                                const char* tls_cert, const char* tls_key,
                                neff_client** out) {
  neff_status status;
  if (Missing(out, "out", &status)) return status;
  *out = nullptr;
  neffd::ClientTls tls;
  tls.ca = OrEmpty(tls_ca);
  tls.cert = OrEmpty(tls_cert);
  tls.key = OrEmpty(tls_key);
  absl::StatusOr<std::unique_ptr<neffd::CacheClient>> client =
      neffd::CacheClient::FromEnvironment(OrEmpty(address), tls);
  if (!client.ok()) return FromStatus(client.status());
  *out = new neff_client{*std::move(client)};
  return NEFF_OK;
}

void neff_client_free(neff_client* client) { delete client; }

neff_status neff_derive_key(const neff_client* client, const void* hlo_bytes,
                            size_t hlo_size, const char* compiler_flags,
                            const char* compiler_version,
                            const char* platform_target, const char* base_key,
                            char* key_out) {
  neff_status status;
  if (Missing(client, "client", &status) ||
      Missing(key_out, "key_out", &status)) {
    return status;
  }
  absl::StatusOr<std::string> key = client->impl->DeriveKey(
      absl::string_view(static_cast<const char*>(hlo_bytes),
                        hlo_bytes != nullptr ? hlo_size : 0),
      OrEmpty(compiler_flags), OrEmpty(compiler_version),
      OrEmpty(platform_target), OrEmpty(base_key));
  if (!key.ok()) return FromStatus(key.status());
  std::snprintf(key_out, NEFF_KEY_SIZE, "%s", key->c_str());
  return NEFF_OK;
}

neff_status neff_torchneuron_key(const void* base_key, size_t base_key_size,
                                 const void* ir_bytes, size_t ir_size,
                                 char* key_out) {
  neff_status status;
  if (Missing(key_out, "key_out", &status) ||
      (base_key_size > 0 && Missing(base_key, "base_key", &status)) ||
      (ir_size > 0 && Missing(ir_bytes, "ir_bytes", &status))) {
    return status;
  }
  const std::string key = neffd::TorchNeuronKey(
      absl::string_view(static_cast<const char*>(base_key), base_key_size),
      absl::string_view(static_cast<const char*>(ir_bytes), ir_size));
  std::snprintf(key_out, NEFF_TORCHNEURON_KEY_SIZE, "%s", key.c_str());
  return NEFF_OK;
}

neff_status neff_lookup(neff_client* client, const char* ns,
                        const char* compiler_version, const char* key,
                        char** path_out) {
  neff_status status;
  if (Missing(client, "client", &status) ||
      Missing(path_out, "path_out", &status)) {
    return status;
  }
  *path_out = nullptr;
  absl::StatusOr<std::optional<neffd::CacheResult>> found =
      client->impl->Lookup(OrEmpty(ns), OrEmpty(compiler_version),
                           OrEmpty(key));
  if (!found.ok()) return FromStatus(found.status());
  if (!found->has_value()) return NEFF_MISS;
  *path_out = Dup((*found)->path);
  return NEFF_OK;
}

neff_status neff_get_or_compile(neff_client* client, const char* ns,
                                const char* compiler_version, const char* key,
                                neff_compile_fn compile, void* user_data,
                                char** path_out) {
  neff_status status;
  if (Missing(client, "client", &status) ||
      Missing(reinterpret_cast<const void*>(compile), "compile", &status) ||
      Missing(path_out, "path_out", &status)) {
    return status;
  }
  *path_out = nullptr;
  neffd::CompileFn fn = [&](const neffd::CompileJob& job) {
    JobState state;
    neff_compile_job c_job{
        job.ns.c_str(),      job.compiler_version.c_str(), job.key.c_str(),
        job.workdir.c_str(), job.output_path.c_str(),      &state};
    switch (compile(user_data, &c_job)) {
      case NEFF_COMPILE_OK:
        return neffd::CompileResult::Ok();
      case NEFF_COMPILE_ERROR:
        return neffd::CompileResult::CompilerError(state.log);
      default:
        return neffd::CompileResult::Cancelled(
            state.log.empty() ? "cancelled by the compile callback"
                              : state.log);
    }
  };
  absl::StatusOr<neffd::CacheResult> result = client->impl->GetOrCompile(
      OrEmpty(ns), OrEmpty(compiler_version), OrEmpty(key), fn);
  if (!result.ok()) return FromStatus(result.status());
  *path_out = Dup(result->path);
  return NEFF_OK;
}

const char* neff_last_error(void) { return last_error.c_str(); }

void neff_free(void* p) { std::free(p); }

}  // extern "C"
