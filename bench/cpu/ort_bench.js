// ort_bench.js: ONNX Runtime (CPU) against qir's generated C program on one model.
//
//   node ort_bench.js --model M.onnx --threads T --rounds R --prog ./m --work DIR
//                     --in NAME=input_0.pb ... [--const NAME=FILE ...] [--atol A] [--rtol R] [--seconds S]
//
// 1. Runs ORT (T intra-op threads, 1 inter-op thread, sequential) and the
//    program (OMP_NUM_THREADS=T) once on the same inputs and compares every
//    output (|ours - ort| <= atol + rtol*|ort|).  Nothing is timed on a mismatch.
// 2. R rounds, alternating: ORT runs N times in-process (each timed, median);
//    then the program runs `--bench N` (its own median of qir_run, weights
//    loaded once, 3 warm-up runs).  N is chosen so a side takes about S seconds.
// Prints one JSON line: {check, max_abs_err, ort_ms, ours_ms, ours_single_run, rounds, ...}.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const ort = require('onnxruntime-node');
const { onnx } = require('onnx-proto');
const Long = require('long');

function parseArgs(argv) {
  const a = { in: [], const: [], threads: 1, rounds: 5, atol: 1e-4, rtol: 1e-3, seconds: 1.0, 'max-run': 20 };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (k === '--in' || k === '--const') { a[k.slice(2)].push(v); i++; } else if (['--model', '--prog', '--work'].includes(k)) { a[k.slice(2)] = v; i++; } else if (['--threads', '--rounds', '--atol', '--rtol', '--seconds', '--max-run'].includes(k)) { a[k.slice(2)] = Number(v); i++; } else throw new Error(`unknown argument ${k}`);
  }
  for (const k of ['model', 'prog', 'work']) if (!a[k]) throw new Error(`--${k} is required`);
  return a;
}

// ONNX TensorProto data types -> ORT tensor types and typed arrays.
const ONNX_TYPES = {
  1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 3: ['int8', Int8Array], 4: ['uint16', Uint16Array],
  5: ['int16', Int16Array], 6: ['int32', Int32Array], 7: ['int64', BigInt64Array], 9: ['bool', Uint8Array],
  10: ['float16', Uint16Array], 11: ['float64', Float64Array], 12: ['uint32', Uint32Array], 13: ['uint64', BigUint64Array],
};

function readTensorProto(file) {
  const t = onnx.TensorProto.decode(fs.readFileSync(file));
  const dims = t.dims.map((d) => (Long.isLong(d) ? d.toNumber() : Number(d)));
  const entry = ONNX_TYPES[t.dataType];
  if (!entry) throw new Error(`${file}: ONNX data type ${t.dataType} is not supported here`);
  const [type, Arr] = entry;
  let data;
  if (t.rawData && t.rawData.length) {
    const raw = Buffer.from(t.rawData);   // a copy, so the typed array is aligned
    data = new Arr(raw.buffer, raw.byteOffset, raw.byteLength / Arr.BYTES_PER_ELEMENT);
  } else if (type === 'float32') data = Float32Array.from(t.floatData);
  else if (type === 'float64') data = Float64Array.from(t.doubleData);
  else if (type === 'int64') data = BigInt64Array.from(t.int64Data.map((v) => BigInt(v.toString())));
  else if (type === 'uint64' || type === 'uint32') data = Arr.from(t.uint64Data.map((v) => (type === 'uint64' ? BigInt(v.toString()) : Number(v))));
  else data = Arr.from(t.int32Data);
  return new ort.Tensor(type, data, dims);
}

// .npy (version 1-3, little-endian, C order) -> { dims, values: Float64Array }
function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const kinds = { '<f4': Float32Array, '<f8': Float64Array, '<i8': BigInt64Array, '<i4': Int32Array, '<i2': Int16Array,
    '|i1': Int8Array, '|u1': Uint8Array, '|b1': Uint8Array, '<u2': Uint16Array, '<u4': Uint32Array, '<u8': BigUint64Array };
  const Arr = kinds[descr];
  if (!Arr) throw new Error(`${file}: dtype ${descr} is not supported here`);
  const raw = Buffer.from(b.subarray(start + hlen));
  const arr = new Arr(raw.buffer, raw.byteOffset, raw.byteLength / Arr.BYTES_PER_ELEMENT);
  return { dims: shape, values: Float64Array.from(arr, Number) };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function runProgram(a, feedsArgs, extra) {
  const env = { ...process.env, OMP_NUM_THREADS: String(a.threads) };
  const p = spawnSync(a.prog, [...feedsArgs, ...extra], { cwd: a.work, env, encoding: 'utf8', maxBuffer: 1 << 24 });
  if (p.error) throw p.error;
  if (p.status !== 0) throw new Error(`${a.prog} failed (status ${p.status}): ${(p.stderr || '').trim().slice(-1000)}`);
  return p.stdout;
}

async function main() {
  const a = parseArgs(process.argv);
  const sess = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const feeds = {};
  const progIn = [];
  // --in NAME=FILE feeds both; --const NAME=FILE only ORT (onnx2qir --bind
  // made it a constant of our program).
  for (const [spec, both] of [...a.in.map((s) => [s, true]), ...a.const.map((s) => [s, false])]) {
    const eq = spec.indexOf('=');
    const name = spec.slice(0, eq), file = path.resolve(spec.slice(eq + 1));
    if (!sess.inputNames.includes(name)) throw new Error(`model has no input '${name}' (inputs: ${sess.inputNames.join(', ')})`);
    feeds[name] = readTensorProto(file);
    if (both) progIn.push('--in', `${name}=${file}`);
  }

  // 1. the check
  const ref = await sess.run(feeds);
  const outArgs = sess.outputNames.flatMap((n, i) => ['--out', `${n}=${path.join(a.work, `ours_${i}.npy`)}`]);
  const c0 = process.hrtime.bigint();
  runProgram(a, progIn, outArgs);
  const checkMs = Number(process.hrtime.bigint() - c0) / 1e6;
  let maxErr = 0, bad = null;
  sess.outputNames.forEach((n, i) => {
    const want = ref[n], got = readNpy(path.join(a.work, `ours_${i}.npy`));
    const w = Float64Array.from(want.data, Number);
    if (w.length !== got.values.length) { bad = bad || `${n}: ${got.values.length} elements, ORT has ${w.length}`; return; }
    for (let k = 0; k < w.length; k++) {
      const d = Math.abs(got.values[k] - w[k]);
      if (Number.isNaN(w[k]) && Number.isNaN(got.values[k])) continue;
      if (!(d <= a.atol + a.rtol * Math.abs(w[k]))) { bad = bad || `${n}[${k}]: ours ${got.values[k]}, ORT ${w[k]}`; }
      if (d > maxErr || Number.isNaN(d)) maxErr = d;
    }
  });
  const result = { check: bad ? 'MISMATCH' : 'ok', max_abs_err: maxErr, detail: bad };
  if (bad) { console.log(JSON.stringify(result)); return; }

  // 2. alternating rounds.  Each side runs about a.seconds per round.  A
  // program whose single run already takes over --max-run seconds is not
  // repeated: its time is the check run's (start-up and weights included).
  for (let i = 0; i < 3; i++) await sess.run(feeds);
  const t0 = process.hrtime.bigint();
  await sess.run(feeds);
  const one = Number(process.hrtime.bigint() - t0) / 1e6;
  const runs = Math.max(3, Math.min(200, Math.round((a.seconds * 1e3) / Math.max(one, 1e-3))));
  const slow = checkMs > a['max-run'] * 1e3;
  const oursRuns = Math.max(1, Math.min(200, Math.round((a.seconds * 1e3) / checkMs)));
  const ortRounds = [], oursRounds = [];
  for (let r = 0; r < a.rounds; r++) {
    const ts = [];
    for (let i = 0; i < runs; i++) {
      const s = process.hrtime.bigint();
      await sess.run(feeds);
      ts.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    ortRounds.push(median(ts));
    if (slow) continue;
    await new Promise((res) => setTimeout(res, 200));   // let ORT's spinning threads go idle
    const out = runProgram(a, progIn, ['--bench', String(oursRuns)]);
    const m = /median ([0-9.]+) ms per run/.exec(out);
    if (!m) throw new Error(`${a.prog} --bench printed no median: ${out.trim().slice(-300)}`);
    oursRounds.push(Number(m[1]));
  }
  Object.assign(result, { ort_ms: median(ortRounds), ours_ms: slow ? checkMs : median(oursRounds), ours_single_run: slow,
    rounds: a.rounds, ort_runs: runs, ours_runs: slow ? 1 : oursRuns, ort_rounds: ortRounds, ours_rounds: oursRounds });
  console.log(JSON.stringify(result));
}

main().catch((e) => { console.log(JSON.stringify({ check: 'ERROR', detail: String(e.message || e).slice(0, 500) })); process.exitCode = 1; });
