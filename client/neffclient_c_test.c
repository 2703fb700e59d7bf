/* The C ABI from C: compiled as C (proving the header is C), run without a
 * daemon (fallback mode) on directories under TEST_TMPDIR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/neffclient.h"

static int failures = 0;

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
              __LINE__, #cond, neff_last_error());                            \
      ++failures;                                                             \
    }                                                                         \
  } while (0)

static int compiles = 0;

static neff_compile_status WriteNeff(void* user_data,
                                     const neff_compile_job* job) {
  FILE* out = fopen(job->output_path, "wb");
  if (out == NULL) return NEFF_COMPILE_CANCELLED;
  fputs((const char*)user_data, out);
  fclose(out);
  ++compiles;
  return NEFF_COMPILE_OK;
}

static neff_compile_status FailCompile(void* user_data,
                                       const neff_compile_job* job) {
  (void)user_data;
  ++compiles;
  neff_compile_set_log(job, "ERROR: operator foo is not supported");
  return NEFF_COMPILE_ERROR;
}

static char* ReadAll(const char* path) {
  static char buf[4096];
  FILE* in = fopen(path, "rb");
  if (in == NULL) return NULL;
  size_t n = fread(buf, 1, sizeof(buf) - 1, in);
  buf[n] = '\0';
  fclose(in);
  return buf;
}

int main(void) {
  const char* tmp = getenv("TEST_TMPDIR");
  char dir[1024];
  static const char* const kVars[][2] = {
      {"TORCH_NEURONX_NEFF_CACHE_DIR", "neff"},
      {"TORCH_NEURONX_HLO_CACHE_DIR", "hlo"},
      {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "local"},
      {"TORCH_NEURONX_DEBUG_DIR", "debug"}};
  for (size_t i = 0; i < sizeof(kVars) / sizeof(kVars[0]); ++i) {
    snprintf(dir, sizeof(dir), "%s/c_abi/%s", tmp ? tmp : "/tmp", kVars[i][1]);
    setenv(kVars[i][0], dir, 1);
  }
  snprintf(dir, sizeof(dir), "unix:/tmp/neffd-c-test-%d.sock", (int)getpid());
  setenv("NEFFD_ADDRESS", dir, 1);

  neff_client* client = NULL;
  CHECK(neff_client_new(NULL, &client) == NEFF_OK);

  char key[NEFF_KEY_SIZE];
  const char hlo[] = "HloModule m";
  CHECK(neff_derive_key(client, hlo, sizeof(hlo) - 1,
                        "-O1 --logfile=/tmp/x.txt", "2.19.1", "trn2", NULL,
                        key) == NEFF_OK);
  CHECK(strlen(key) == 64);
  char same[NEFF_KEY_SIZE];
  CHECK(neff_derive_key(client, hlo, sizeof(hlo) - 1, "-O1", "2.19.1", "trn2",
                        NULL, same) == NEFF_OK);
  CHECK(strcmp(key, same) == 0);
  CHECK(neff_derive_key(client, NULL, 0, "", "2.19.1", "trn2", NULL, same) ==
        NEFF_INVALID_ARGUMENT);
  CHECK(strstr(neff_last_error(), "hlo_bytes") != NULL);

  /* TorchNeuron's key needs no client; the vector is
   * tests/torchneuron_key_test.cc's (xxhsum -H2 of "basekeyHloModule m\n"). */
  char tn_key[NEFF_TORCHNEURON_KEY_SIZE];
  const char ir[] = "HloModule m\n";
  CHECK(neff_torchneuron_key("basekey", 7, ir, sizeof(ir) - 1, tn_key) ==
        NEFF_OK);
  CHECK(strcmp(tn_key, "c496e666b3b31b0b526f14746a3df645") == 0);
  CHECK(neff_torchneuron_key(NULL, 0, NULL, 0, tn_key) == NEFF_OK);
  CHECK(strcmp(tn_key, "99aa06d3014798d86001c324468d497f") == 0);
  CHECK(neff_torchneuron_key(NULL, 3, ir, 1, tn_key) == NEFF_INVALID_ARGUMENT);
  CHECK(strstr(neff_last_error(), "base_key") != NULL);

  char* path = NULL;
  CHECK(neff_lookup(client, "neff", "2.19.1", key, &path) == NEFF_MISS);
  CHECK(path == NULL);

  CHECK(neff_get_or_compile(client, "neff", "2.19.1", key, WriteNeff,
                            (void*)"neff from C", &path) == NEFF_OK);
  /* TorchNeuron's layout: {root}/{k0k1}/{k2k3}/{key}.neff. */
  char shard[8];
  snprintf(shard, sizeof shard, "/%.2s/%.2s/", key, key + 2);
  CHECK(path != NULL && strstr(path, shard) != NULL &&
        strstr(path, ".neff") != NULL);
  CHECK(path != NULL && strcmp(ReadAll(path), "neff from C") == 0);
  neff_free(path);
  CHECK(neff_get_or_compile(client, "neff", "2.19.1", key, WriteNeff,
                            (void*)"other", &path) == NEFF_OK);
  CHECK(compiles == 1);
  CHECK(path != NULL && strcmp(ReadAll(path), "neff from C") == 0);
  neff_free(path);
  CHECK(neff_lookup(client, "neff", "2.19.1", key, &path) == NEFF_OK);
  neff_free(path);

  CHECK(neff_get_or_compile(client, "neff", "2.19.1", "bad0", FailCompile, NULL,
                            &path) == NEFF_COMPILE_FAILED);
  CHECK(strstr(neff_last_error(), "operator foo") != NULL);
  CHECK(strstr(neff_last_error(), "neuronx-cc/bad0") != NULL);
  CHECK(neff_get_or_compile(client, "neff", "2.19.1", "bad0", FailCompile, NULL,
                            &path) == NEFF_COMPILE_FAILED);
  CHECK(compiles == 2); /* the recorded failure, not a second compile */

  CHECK(neff_get_or_compile(client, "neff", "2.19.1", "../etc", WriteNeff,
                            (void*)"x", &path) == NEFF_INVALID_ARGUMENT);
  CHECK(neff_get_or_compile(client, "neff", "2.19.1", "k", NULL, NULL, &path) ==
        NEFF_INVALID_ARGUMENT);
  neff_client_free(client);

  /* TLS files that cannot be read: an error naming the file, no client. */
  client = (neff_client*)&failures;
  CHECK(neff_client_new_tls("127.0.0.1:1", "/nonexistent/ca.pem", NULL, NULL,
                            &client) == NEFF_INVALID_ARGUMENT);
  CHECK(client == NULL);
  CHECK(strstr(neff_last_error(), "tls_ca") != NULL);
  CHECK(strstr(neff_last_error(), "/nonexistent/ca.pem") != NULL);
  CHECK(neff_client_new_tls(NULL, NULL, NULL, NULL, &client) == NEFF_OK);
  neff_client_free(client);

  if (failures == 0) printf("PASS\n");
  return failures == 0 ? 0 : 1;
}
