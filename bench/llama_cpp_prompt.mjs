// llama.cpp's prompt processing of LENGTH random tokens, timed, through node-llama-cpp's prebuilt CPU
// binaries (bench/rotary_cpu.py runs it):
//   node bench/llama_cpp_prompt.mjs NLC_PREFIX MODEL.gguf LENGTH THREADS BATCH VOCAB
// NLC_PREFIX holds node_modules/node-llama-cpp (`npm install --prefix NLC_PREFIX node-llama-cpp`).
// Context LENGTH, batch = ubatch = BATCH (the addon sets n_ubatch = n_batch), exactly THREADS threads,
// flash attention on, the KV cache in llama.cpp's default F16. Prints one JSON line.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [prefix, model, length, threads, batch, vocab] = process.argv.slice(2);
const L = Number(length), T = Number(threads), V = Number(vocab);
const entry = path.join(prefix, "node_modules", "node-llama-cpp", "dist", "index.js");
const { getLlama } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: "never", maxThreads: T, logLevel: "error" });
const m = await llama.loadModel({ modelPath: model });
const context = await m.createContext({ contextSize: L, batchSize: Number(batch), threads: { ideal: T, min: T },
                                        flashAttention: true });
const sequence = context.getSequence();
let seed = L;  // a fixed pseudo-random prompt of ids in [3, VOCAB) (after <unk>, <s>, </s>)
const tokens = Array.from({ length: L }, () => 3 + ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % (V - 3)));
const t0 = performance.now();
await sequence.evaluateWithoutGeneratingNewTokens(tokens);
const seconds = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ seconds, context: context.contextSize, batch: Number(batch), threads: T,
                             flash_attention: context.flashAttention }));
await llama.dispose();
