// Generates es6-numbers.txt: lines "<ieee754 bits as 16 hex digits>,<Number.prototype.toString>"
// for doubles at the ES6 formatting boundaries and their neighbours, plus deterministic
// pseudo-random bit patterns. Ground truth is the JavaScript engine running this script.
// Run: node gen-es6-numbers.js > es6-numbers.txt
'use strict';
const buf = new DataView(new ArrayBuffer(8));
const bitsOf = (x) => { buf.setFloat64(0, x); return buf.getBigUint64(0); };
const ofBits = (b) => { buf.setBigUint64(0, BigInt.asUintN(64, b)); return buf.getFloat64(0); };
const seen = new Set();
const out = [];
const emit = (x) => {
  if (!Number.isFinite(x)) return;
  const b = bitsOf(x);
  if (seen.has(b)) return;
  seen.add(b);
  out.push(b.toString(16).padStart(16, '0') + ',' + x.toString());
};
// x and its neighbours up to k ulps away on both sides (and the negatives).
const around = (x, k) => {
  const b = bitsOf(Math.abs(x));
  for (let d = -k; d <= k; d++) {
    const nb = b + BigInt(d);
    if (nb < 0n || nb >= 0x7ff0000000000000n) continue;
    emit(ofBits(nb));
    emit(-ofBits(nb));
  }
};
const anchors = [
  0, 1, 10, 1e21, 1e20, 999999999999999900000, 1e-6, 1e-7, 0.000001, 0.0000001,
  2 ** 53, 2 ** 53 - 1, 2 ** 53 + 2, 2 ** 63, 2 ** 64, Number.MAX_SAFE_INTEGER,
  Number.MAX_VALUE, Number.MIN_VALUE, 2.2250738585072014e-308 /* smallest normal */,
  2.225073858507201e-308 /* largest subnormal */, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, Math.PI, Math.E,
  333333333.33333329, 4.5, 0.002, 1e-27, 1e30, 12345678901234567890, 9.007199254740993e15,
];
for (const a of anchors) around(a, 8);
for (let e = -325; e <= 308; e++) around(Number("1e" + e), 1);
for (let e = -1074; e <= 1023; e++) emit(2 ** e);
// Subnormals: the smallest ones and a spread across the range.
for (let i = 1n; i < 64n; i++) emit(ofBits(i));
for (let i = 1n; i < 0x10000000000000n; i = i * 3n + 1n) emit(ofBits(i));
// Deterministic pseudo-random doubles (xorshift64*), all exponents.
let s = 0x9e3779b97f4a7c15n;
for (let i = 0; i < 4000; i++) {
  s ^= s >> 12n; s ^= BigInt.asUintN(64, s << 25n); s ^= s >> 27n;
  const r = BigInt.asUintN(64, s * 0x2545f4914f6cdd1dn);
  emit(ofBits(r));
}
// Short decimals such as prices and quantities.
for (let i = 0; i < 1000; i++) emit(i / 100);
process.stdout.write(out.join('\n') + '\n');
