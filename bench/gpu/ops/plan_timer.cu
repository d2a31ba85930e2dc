// plan_timer: times every Roller plan of every operator that prepare_ops.py built
// (issue 23, step 3), checks each plan's output against plan 0's, and writes JSON.
//
//   plan_timer OUTDIR/manifest.json RESULTS.json [--dry-run] [--reps N] [--ops a,b]
//              [--dump DIR] [--op-timeout S] [--deadline S]
//
// Reads OUTDIR/manifest.txt (the line form of manifest.json); plan k of an op is the
// API qir_p<k>_init, qir_p<k>_run_stream, qir_p<k>_free of the library the manifest
// names. Each operator runs in a child process forked before any CUDA call, so a kernel
// fault or a hang (alarm, default 30 s) costs that operator's current plan only: the
// parent starts a new child at the next plan (after two timeouts, the op's remaining
// plans are not run). A child reports over a pipe: "S k" when plan k starts, "R k {json}"
// when it is done. --dump DIR writes input set 0 and plan 0's output per op as raw little-endian
// files (DIR/<op>/in<i>.bin, out<i>.bin) for torch_ops.py's independent check.
// --deadline S (default 200): ops not started S seconds after the start are recorded as
// not_run, so that RESULTS.json stays whole inside an outer timeout.
// --dry-run needs no GPU: it loads every plan library and resolves its API.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

struct Tensor {
  std::string dtype;
  std::vector<int64_t> dims;
  size_t elems() const {
    size_t n = 1;
    for (int64_t d : dims) n *= (size_t)d;
    return n;
  }
  size_t elem_bytes() const { return dtype == "f16" || dtype == "bf16" ? 2 : 4; }
  size_t bytes() const { return elems() * elem_bytes(); }
};

struct Plan {
  int index;
  std::string status, so, prefix;  // prefix: the plan's API names, "qir_p3_" for qir_p3_init
  double est_us;
};

struct Op {
  std::string name;
  std::vector<Tensor> ins, outs;
  std::vector<Plan> plans;
};

typedef struct qir_model qir_model;
typedef int (*init_fn)(qir_model **, const char *);
typedef int (*run_stream_fn)(qir_model *, const void *const *, void *const *, cudaStream_t);
typedef void (*free_fn)(qir_model *);

static std::string dir_of(const std::string &p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? std::string(".") : p.substr(0, s);
}

static bool read_manifest(const std::string &path, std::vector<Op> &ops) {
  FILE *f = fopen(path.c_str(), "r");
  if (!f) {
    fprintf(stderr, "plan_timer: cannot open %s: %s\n", path.c_str(), strerror(errno));
    return false;
  }
  char line[4096];
  int lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char kind[16] = "";
    if (sscanf(line, "%15s", kind) != 1) continue;
    std::string k = kind;
    char *rest = line + strlen(kind);
    if (k == "op") {
      char name[256];
      int nin, nout, np;
      if (sscanf(rest, "%255s %d %d %d", name, &nin, &nout, &np) != 4) goto bad;
      ops.push_back(Op());
      ops.back().name = name;
    } else if (ops.empty()) {
      goto bad;
    } else if (k == "input" || k == "output") {
      Tensor t;
      char dt[16];
      int rank, used;
      if (sscanf(rest, "%15s %d%n", dt, &rank, &used) != 2 || rank < 0 || rank > 8) goto bad;
      t.dtype = dt;
      if (t.dtype != "f32" && t.dtype != "f16" && t.dtype != "bf16") goto bad;
      rest += used;
      for (int i = 0; i < rank; i++) {
        long long d;
        if (sscanf(rest, "%lld%n", &d, &used) != 1) goto bad;
        rest += used;
        t.dims.push_back(d);
      }
      (k == "input" ? ops.back().ins : ops.back().outs).push_back(t);
    } else if (k == "plan") {
      Plan p;
      char st[64], so[1024], pre[64];
      if (sscanf(rest, "%d %63s %lf %1023s %63s", &p.index, st, &p.est_us, so, pre) != 5) goto bad;
      p.status = st;
      p.so = so;
      p.prefix = pre;
      ops.back().plans.push_back(p);
    } else if (k != "end") {
      goto bad;
    }
  }
  fclose(f);
  return true;
bad:
  fprintf(stderr, "%s:%d: error: bad manifest line: %s", path.c_str(), lineno, line);
  fclose(f);
  return false;
}

// ---- JSON helpers -------------------------------------------------------------------
static std::string jstr(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if ((unsigned char)c < 0x20) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o + "\"";
}
static std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// ---- the child: one operator from plan `start` on ------------------------------------
static int g_fd = -1;  // the pipe to the parent (set once in the child)
static void say(const std::string &s) {
  std::string l = s + "\n";
  size_t off = 0;
  while (off < l.size()) {
    ssize_t w = write(g_fd, l.data() + off, l.size() - off);
    if (w <= 0) return;
    off += (size_t)w;
  }
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static uint64_t hash_str(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ (unsigned char)c) * 1099511628211ull;
  return h;
}
// Uniform in [-1, 1], a function of (op, set, input, element) only.
static void fill_host(std::vector<char> &buf, const Tensor &t, uint64_t seed) {
  size_t n = t.elems();
  buf.resize(t.bytes());
  uint64_t s = mix(seed);
  for (size_t i = 0; i < n; i++) {
    s = mix(s + i);
    float v = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    if (t.dtype == "f16") {
      __half h = __float2half(v);
      memcpy(&buf[i * 2], &h, 2);
    } else if (t.dtype == "bf16") {
      __nv_bfloat16 h = __float2bfloat16(v);
      memcpy(&buf[i * 2], &h, 2);
    } else {
      memcpy(&buf[i * 4], &v, 4);
    }
  }
}
static void to_float(const std::vector<char> &raw, const Tensor &t, std::vector<float> &out) {
  size_t n = t.elems();
  out.resize(n);
  for (size_t i = 0; i < n; i++) {
    if (t.dtype == "f16") {
      __half h;
      memcpy(&h, &raw[i * 2], 2);
      out[i] = __half2float(h);
    } else if (t.dtype == "bf16") {
      __nv_bfloat16 h;
      memcpy(&h, &raw[i * 2], 2);
      out[i] = __bfloat162float(h);
    } else {
      memcpy(&out[i], &raw[i * 4], 4);
    }
  }
}

// Holds the stream for `cycles` clock cycles (see the timing loop).
__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

static bool write_file(const std::string &path, const void *p, size_t n) {
  FILE *f = fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = fwrite(p, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

#define CK(call)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      err = std::string(#call) + ": " + cudaGetErrorName(e_) + " " + cudaGetErrorString(e_); \
      goto fail;                                                                       \
    }                                                                                  \
  } while (0)

struct Loaded {
  void *lib = nullptr;
  init_fn init = nullptr;
  run_stream_fn run = nullptr;
  free_fn fr = nullptr;
  qir_model *model = nullptr;
};

static std::string load(const std::string &dir, const Plan &p, Loaded &L) {
  std::string path = dir + "/" + p.so;
  L.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!L.lib) return std::string("dlopen: ") + dlerror();
  L.init = (init_fn)dlsym(L.lib, (p.prefix + "init").c_str());
  L.run = (run_stream_fn)dlsym(L.lib, (p.prefix + "run_stream").c_str());
  L.fr = (free_fn)dlsym(L.lib, (p.prefix + "free").c_str());
  if (!L.init || !L.run || !L.fr)
    return "dlsym: " + p.prefix + "init/run_stream/free missing in " + path;
  return "";
}
static void unload(Loaded &L) {
  if (L.model && L.fr) L.fr(L.model);
  L.model = nullptr;
  if (L.lib) dlclose(L.lib);
  L.lib = nullptr;
}

// ref_hint: the plan an earlier child of this op used as the reference (-1: none yet).
static int child(const std::string &dir, const Op &op, int start, int ref_hint, int reps_fixed,
                 const std::string &dump, double plan_budget_s) {
  const int nsets = 3;
  std::string err;
  std::vector<std::vector<void *>> din(nsets);
  std::vector<void *> dout;
  std::vector<std::vector<float>> ref;  // the reference plan's outputs, as floats
  std::vector<cudaEvent_t> ev;
  cudaStream_t stream = nullptr;
  int ref_plan = -1;
  long long spin_cycles = 0;
  {
    cudaDeviceProp prop;
    CK(cudaSetDevice(0));
    CK(cudaGetDeviceProperties(&prop, 0));
    say(std::string("D ") + prop.name);
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<char> host;
    for (int s = 0; s < nsets; s++)
      for (size_t i = 0; i < op.ins.size(); i++) {
        fill_host(host, op.ins[i], hash_str(op.name) * 31 + (uint64_t)s * 1000003 + i);
        void *p = nullptr;
        CK(cudaMalloc(&p, op.ins[i].bytes()));
        din[s].push_back(p);
        CK(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice));
        if (s == 0 && !dump.empty() && start == 0) {
          std::string d = dump + "/" + op.name;
          mkdir(dump.c_str(), 0755);
          mkdir(d.c_str(), 0755);
          if (!write_file(d + "/in" + std::to_string(i) + ".bin", host.data(), host.size()))
            fprintf(stderr, "plan_timer: cannot write the dump under %s\n", d.c_str());
        }
      }
    for (const Tensor &t : op.outs) {
      void *p = nullptr;
      CK(cudaMalloc(&p, t.bytes()));
      dout.push_back(p);
    }
    int khz = 0;
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    spin_cycles = (long long)(khz > 0 ? khz : 2000000) * 5;  // kHz: 5 ms
    ev.resize(2 * 200 + 2);
    for (auto &e : ev) CK(cudaEventCreate(&e));
  }
  // The reference is the first plan whose output has no NaN; a child restarted after a
  // fault recomputes the earlier child's reference first (without timing it).
  for (size_t k = 0; k < op.plans.size(); k++) {
    const Plan &p = op.plans[k];
    bool reference_only = (int)k < start;
    if (reference_only && ((int)k != ref_hint || p.status != "ok")) continue;
    if (p.status != "ok") {
      say("S " + std::to_string(k));
      say("R " + std::to_string(k) + " {\"status\": " + jstr(p.status) + "}");
      continue;
    }
    if (!reference_only) say("S " + std::to_string(k));
    Loaded L;
    std::string perr = load(dir, p, L);
    std::string status = "ok", check = "", extra;
    double max_rel = NAN;
    size_t nan_count = 0, poison_count = 0;
    std::vector<float> times;
    int reps = 0;
    std::vector<std::vector<char>> raw(op.outs.size());
    if (!perr.empty()) {
      status = "load_failed";
      goto report;
    }
    if (L.init(&L.model, nullptr) != 0) {
      status = "init_failed";
      perr = "qir_init returned nonzero";
      goto report;
    }
    {
      cudaError_t e;
#define PK(call)                                                                 \
  if ((e = (call)) != cudaSuccess) {                                             \
    status = "cuda_error";                                                       \
    perr = std::string(#call) + ": " + cudaGetErrorName(e) + " " + cudaGetErrorString(e); \
    goto report;                                                                 \
  }
      for (size_t o = 0; o < op.outs.size(); o++) PK(cudaMemset(dout[o], 0xff, op.outs[o].bytes()));
      PK(cudaDeviceSynchronize());
      if (L.run(L.model, (const void *const *)din[0].data(), (void *const *)dout.data(), stream) != 0) {
        status = "run_failed";
        perr = "qir_run_stream returned nonzero";
        goto report;
      }
      PK(cudaGetLastError());
      PK(cudaStreamSynchronize(stream));
      for (size_t o = 0; o < op.outs.size(); o++) {
        raw[o].resize(op.outs[o].bytes());
        PK(cudaMemcpy(raw[o].data(), dout[o], raw[o].size(), cudaMemcpyDeviceToHost));
      }
      std::vector<float> got;
      max_rel = 0;
      for (size_t o = 0; o < op.outs.size(); o++) {
        const Tensor &t = op.outs[o];
        to_float(raw[o], t, got);
        size_t eb = t.elem_bytes();
        for (size_t i = 0; i < got.size(); i++) {
          bool poisoned = true;
          for (size_t b = 0; b < eb; b++) poisoned &= (unsigned char)raw[o][i * eb + b] == 0xff;
          poison_count += poisoned;
          nan_count += !std::isfinite(got[i]);
        }
        if (ref_plan >= 0) {
          double amax = 0, dmax = 0;
          for (size_t i = 0; i < got.size(); i++) amax = std::max(amax, (double)std::fabs(ref[o][i]));
          for (size_t i = 0; i < got.size(); i++) {
            double d = std::fabs((double)got[i] - (double)ref[o][i]);
            if (!(d <= dmax)) dmax = std::isfinite(d) ? d : INFINITY;
          }
          max_rel = std::max(max_rel, amax > 0 ? dmax / amax : dmax);
        }
      }
      if (ref_plan < 0) {
        if (nan_count == 0) {
          ref_plan = (int)k;
          ref.resize(op.outs.size());
          for (size_t o = 0; o < op.outs.size(); o++) to_float(raw[o], op.outs[o], ref[o]);
          check = "reference";
          max_rel = 0;
          if (!dump.empty() && k == 0)
            for (size_t o = 0; o < op.outs.size(); o++)
              write_file(dump + "/" + op.name + "/out" + std::to_string(o) + ".bin", raw[o].data(),
                         raw[o].size());
        } else {
          check = "nan_no_reference";
        }
      } else {
        // plans round differently (K split, accumulation order): about 8 bits of mantissa in bf16
        double tol = op.outs[0].dtype == "bf16" ? 6e-2 : op.outs[0].dtype == "f16" ? 2e-2 : 1e-3;
        check = nan_count ? "nan" : (max_rel <= tol ? "ok" : "mismatch");
      }
      if (poison_count) check += "+unwritten";
      if (reference_only) {
        unload(L);
        continue;
      }
      // Warm up on the rotating sets, then one timed run picks the repetitions.
      for (int w = 0; w < 5; w++)
        if (L.run(L.model, (const void *const *)din[w % nsets].data(), (void *const *)dout.data(), stream)) {
          status = "run_failed";
          goto report;
        }
      PK(cudaEventRecord(ev[0], stream));
      L.run(L.model, (const void *const *)din[0].data(), (void *const *)dout.data(), stream);
      PK(cudaEventRecord(ev[1], stream));
      PK(cudaEventSynchronize(ev[1]));
      float one_ms = 0;
      PK(cudaEventElapsedTime(&one_ms, ev[0], ev[1]));
      reps = reps_fixed > 0 ? reps_fixed : (int)(plan_budget_s * 1e3 / std::max(one_ms, 1e-3f));
      reps = std::max(20, std::min(200, reps));
      if (reps_fixed > 0) reps = std::min(reps_fixed, 200);
      // In chunks of 50 runs, each queued behind a 5 ms spin kernel: the host queues the
      // whole chunk while the GPU waits, so the event pairs time the GPU's work and not
      // the launch gaps of microsecond kernels.
      for (int r = 0; r < reps; r++) {
        if (r % 50 == 0) {
          spin<<<1, 1, 0, stream>>>(spin_cycles);
          PK(cudaGetLastError());
        }
        PK(cudaEventRecord(ev[2 + 2 * r], stream));
        if (L.run(L.model, (const void *const *)din[(r + 1) % nsets].data(), (void *const *)dout.data(),
                  stream)) {
          status = "run_failed";
          goto report;
        }
        PK(cudaEventRecord(ev[3 + 2 * r], stream));
        if (r % 50 == 49) PK(cudaStreamSynchronize(stream));
      }
      PK(cudaGetLastError());
      PK(cudaStreamSynchronize(stream));
      for (int r = 0; r < reps; r++) {
        float ms = 0;
        PK(cudaEventElapsedTime(&ms, ev[2 + 2 * r], ev[3 + 2 * r]));
        times.push_back(ms * 1e3f);
      }
#undef PK
    }
  report : {
    std::string j = "{\"status\": " + jstr(status);
    if (!check.empty()) j += ", \"check\": " + jstr(check) + ", \"max_rel_err\": " + jnum(max_rel);
    j += ", \"nan_count\": " + std::to_string(nan_count) + ", \"unwritten_count\": " + std::to_string(poison_count);
    if (!times.empty()) {
      std::sort(times.begin(), times.end());
      size_t n = times.size();
      double med = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
      j += ", \"median_us\": " + jnum(med) + ", \"min_us\": " + jnum(times[0]) + ", \"reps\": " + std::to_string(reps);
    }
    if (!perr.empty()) j += ", \"error\": " + jstr(perr);
    j += "}";
    if (!reference_only) say("R " + std::to_string(k) + " " + j);
    unload(L);
    if (status == "cuda_error") {
      // A sticky error (a fault) leaves the context unusable: end here; the parent
      // goes on at the next plan in a fresh process.
      if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return 3;
    }
    (void)extra;
  }
  }
  return 0;
fail:
  say("E " + err);
  return 2;
}

// ---- the parent ----------------------------------------------------------------------
struct PlanResult {
  bool have = false;
  std::string json;  // the child's object
};

static double spearman(const std::vector<double> &a, const std::vector<double> &b) {
  size_t n = a.size();
  if (n < 3) return NAN;
  auto ranks = [n](const std::vector<double> &v) {
    std::vector<size_t> idx(n);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) j++;
      for (size_t k = i; k <= j; k++) r[idx[k]] = 0.5 * (double)(i + j);
      i = j + 1;
    }
    return r;
  };
  std::vector<double> ra = ranks(a), rb = ranks(b);
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; i++) ma += ra[i], mb += rb[i];
  ma /= n, mb /= n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; i++) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : NAN;
}

static bool json_num(const std::string &j, const char *key, double &v) {
  std::string k = std::string("\"") + key + "\": ";
  size_t p = j.find(k);
  if (p == std::string::npos) return false;
  const char *s = j.c_str() + p + k.size();
  if (!strncmp(s, "null", 4)) return false;
  v = strtod(s, nullptr);
  return true;
}
static bool json_has(const std::string &j, const char *kv) { return j.find(kv) != std::string::npos; }

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: plan_timer OUTDIR/manifest.json RESULTS.json [--dry-run] [--reps N] [--ops a,b]\n"
            "                  [--dump DIR] [--op-timeout S] [--deadline S]\n");
    return 2;
  }
  std::string manifest = argv[1], results = argv[2], only, dump;
  bool dry = false;
  int reps = 0, timeout_s = 30, deadline_s = 200;
  for (int i = 3; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--dry-run") dry = true;
    else if (a == "--reps" && i + 1 < argc) reps = atoi(argv[++i]);
    else if (a == "--ops" && i + 1 < argc) only = argv[++i];
    else if (a == "--dump" && i + 1 < argc) dump = argv[++i];
    else if (a == "--op-timeout" && i + 1 < argc) timeout_s = atoi(argv[++i]);
    else if (a == "--deadline" && i + 1 < argc) deadline_s = atoi(argv[++i]);
    else {
      fprintf(stderr, "plan_timer: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::string dir = dir_of(manifest);
  std::vector<Op> ops;
  if (!read_manifest(dir + "/manifest.txt", ops)) return 1;
  std::vector<std::string> want;
  for (size_t p = 0; !only.empty() && p <= only.size();) {
    size_t c = only.find(',', p);
    if (c == std::string::npos) c = only.size();
    want.push_back(only.substr(p, c - p));
    p = c + 1;
  }
  FILE *out = fopen(results.c_str(), "w");
  if (!out) {
    fprintf(stderr, "plan_timer: cannot write %s: %s\n", results.c_str(), strerror(errno));
    return 1;
  }
  std::string device = "";
  fprintf(out, "{\"manifest\": %s, \"dry_run\": %s, \"ops\": [\n", jstr(manifest).c_str(), dry ? "true" : "false");
  int nops = 0, bad_dry = 0;
  std::vector<double> rhos;
  int within10 = 0, nratio = 0;
  struct timespec t_start;
  clock_gettime(CLOCK_MONOTONIC, &t_start);
  for (const Op &op : ops) {
    if (!want.empty() && std::find(want.begin(), want.end(), op.name) == want.end()) continue;
    std::vector<PlanResult> res(op.plans.size());
    struct timespec t_now;
    clock_gettime(CLOCK_MONOTONIC, &t_now);
    double elapsed = (double)(t_now.tv_sec - t_start.tv_sec) + 1e-9 * (double)(t_now.tv_nsec - t_start.tv_nsec);
    if (!dry && elapsed > deadline_s) {
      for (size_t k = 0; k < res.size(); k++)
        res[k].have = true, res[k].json = "{\"status\": \"not_run\", \"error\": \"past the --deadline\"}";
      printf("%-22s not run: past the deadline (%d s)\n", op.name.c_str(), deadline_s);
    } else if (dry) {
      int ok = 0;
      for (size_t k = 0; k < op.plans.size(); k++) {
        const Plan &p = op.plans[k];
        std::string st = p.status;
        if (p.status == "ok") {
          Loaded L;
          std::string e = load(dir, p, L);
          if (!e.empty()) {
            st = "load_failed";
            fprintf(stderr, "%s plan %zu: %s\n", op.name.c_str(), k, e.c_str());
            bad_dry++;
          } else {
            ok++;
          }
          unload(L);
        }
        res[k].have = true;
        res[k].json = "{\"status\": " + jstr(st) + ", \"dry_run\": true}";
      }
      size_t inb = 0;
      for (const Tensor &t : op.ins) inb += t.bytes();
      printf("%-22s would time %d of %zu plans (3 input sets, %.1f MiB of inputs, warm-up 5, 20..200 reps)\n",
             op.name.c_str(), ok, op.plans.size(), 3.0 * inb / 1048576.0);
    } else {
      int start = 0, children = 0, timeouts = 0;
      double plan_budget = 1.2 / std::max<size_t>(1, op.plans.size());
      while (start < (int)op.plans.size() && children <= (int)op.plans.size()) {
        children++;
        int fds[2];
        if (pipe(fds) != 0) {
          perror("pipe");
          return 1;
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
          perror("fork");
          return 1;
        }
        if (pid == 0) {
          close(fds[0]);
          g_fd = fds[1];
          alarm((unsigned)timeout_s);
          int ref_hint = -1;
          for (size_t k = 0; k < res.size(); k++)
            if (res[k].have && json_has(res[k].json, "\"check\": \"reference\"")) ref_hint = (int)k;
          _exit(child(dir, op, start, ref_hint, reps, dump, plan_budget));
        }
        close(fds[1]);
        std::string buf;
        char tmp[4096];
        ssize_t n;
        while ((n = read(fds[0], tmp, sizeof tmp)) > 0) buf.append(tmp, (size_t)n);
        close(fds[0]);
        int wst = 0;
        waitpid(pid, &wst, 0);
        int started = -1, last_done = start - 1;
        std::string cerr;
        for (size_t p = 0; p < buf.size();) {
          size_t e = buf.find('\n', p);
          if (e == std::string::npos) e = buf.size();
          std::string l = buf.substr(p, e - p);
          p = e + 1;
          if (l.size() < 2) continue;
          if (l[0] == 'D') device = l.substr(2);
          else if (l[0] == 'E') cerr = l.substr(2);
          else if (l[0] == 'S') started = atoi(l.c_str() + 2);
          else if (l[0] == 'R') {
            int k = atoi(l.c_str() + 2);
            size_t b = l.find('{');
            if (k >= 0 && k < (int)res.size() && b != std::string::npos) {
              res[k].have = true;
              res[k].json = l.substr(b);
              last_done = std::max(last_done, k);
            }
          }
        }
        std::string how = WIFSIGNALED(wst) ? (WTERMSIG(wst) == SIGALRM ? "timeout" : "crashed (signal " + std::to_string(WTERMSIG(wst)) + ")")
                                           : "exit " + std::to_string(WEXITSTATUS(wst));
        if (!cerr.empty()) {  // setup failed: nothing of this op can run
          fprintf(stderr, "%s: %s\n", op.name.c_str(), cerr.c_str());
          for (size_t k = start; k < res.size(); k++)
            if (!res[k].have) res[k].have = true, res[k].json = "{\"status\": \"setup_failed\", \"error\": " + jstr(cerr) + "}";
          break;
        }
        if (started > last_done) {  // died inside plan `started`
          res[started].have = true;
          res[started].json = "{\"status\": " + jstr(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGALRM ? "timeout" : "crashed") +
                              ", \"error\": " + jstr("child " + how) + "}";
          last_done = started;
        }
        if (WIFSIGNALED(wst) && WTERMSIG(wst) == SIGALRM && ++timeouts >= 2) {
          for (size_t k = 0; k < res.size(); k++)
            if (!res[k].have) res[k].have = true, res[k].json = "{\"status\": \"not_run\", \"error\": \"two timeouts in this op\"}";
          break;
        }
        if (WIFEXITED(wst) && WEXITSTATUS(wst) == 0 && last_done >= (int)op.plans.size() - 1) break;
        if (last_done < start) {  // no progress at all: give up on the op
          for (size_t k = start; k < res.size(); k++)
            if (!res[k].have) res[k].have = true, res[k].json = "{\"status\": \"not_run\", \"error\": " + jstr("child " + how) + "}";
          break;
        }
        start = last_done + 1;
      }
      for (size_t k = 0; k < res.size(); k++)
        if (!res[k].have) res[k].have = true, res[k].json = "{\"status\": \"not_run\"}";
    }
    // One JSON row per plan, and the operator's summary line.
    std::vector<double> est, med;
    double top1 = NAN, best = NAN;
    int best_k = -1;
    for (size_t k = 0; k < op.plans.size(); k++) {
      std::string j = res[k].json;
      fprintf(out, "%s{\"op\": %s, \"plan\": %zu, \"est_us\": %s, \"so\": %s, \"result\": %s}\n",
              nops || k ? "," : "", jstr(op.name).c_str(), k, jnum(op.plans[k].est_us).c_str(),
              jstr(op.plans[k].so).c_str(), j.c_str());
      double m;
      bool correct = json_has(j, "\"check\": \"ok\"") || json_has(j, "\"check\": \"reference\"");
      if (correct && json_num(j, "median_us", m)) {
        est.push_back(op.plans[k].est_us);
        med.push_back(m);
        if (k == 0) top1 = m;
        if (!(m >= best)) best = m, best_k = (int)k;
      }
    }
    nops++;
    if (!dry) {
      double rho = spearman(est, med);
      int nbad = 0;
      for (auto &r : res)
        if (!json_has(r.json, "\"check\": \"ok\"") && !json_has(r.json, "\"check\": \"reference\"")) nbad++;
      printf("%-22s plans %zu (%d failed/wrong)  top1 %8.2f us  best %8.2f us (plan %d)  best/top1 %.3f  rho %s\n",
             op.name.c_str(), op.plans.size(), nbad, top1, best, best_k, best / top1, jnum(rho).c_str());
      fflush(stdout);
      if (std::isfinite(rho)) rhos.push_back(rho);
      if (std::isfinite(top1) && std::isfinite(best)) {
        nratio++;
        within10 += top1 <= 1.1 * best;
      }
    }
  }
  fprintf(out, "], \"device\": %s}\n", jstr(device).c_str());
  fclose(out);
  if (dry) {
    printf("dry run: %d ops, %d plan libraries failed to load; wrote %s\n", nops, bad_dry, results.c_str());
    return bad_dry ? 1 : 0;
  }
  std::sort(rhos.begin(), rhos.end());
  double mrho = rhos.empty() ? NAN : rhos.size() % 2 ? rhos[rhos.size() / 2] : 0.5 * (rhos[rhos.size() / 2 - 1] + rhos[rhos.size() / 2]);
  printf("device %s: top-1 within 10%% of best-of-top-10 on %d of %d ops; median rho %s; wrote %s\n", device.c_str(),
         within10, nratio, jnum(mrho).c_str(), results.c_str());
  return 0;
}
