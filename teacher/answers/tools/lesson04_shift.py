# Q9 of lesson 04: shift a test image by one pixel; how much do conv1's maps and the logits change?
# Plain python (no numpy on this VM): the CNN's forward from the checkpoint, eval mode.
import json, struct, gzip, sys, math, array
ck = sys.argv[1]; idx = int(sys.argv[2]) if len(sys.argv) > 2 else 0
raw = open(ck, "rb").read()
(n,) = struct.unpack("<Q", raw[:8]); hdr = json.loads(raw[8:8 + n]); meta = hdr.get("__metadata__", {})
def T(name):
    b, e = hdr[name]["data_offsets"]; a = array.array("f"); a.frombytes(raw[8 + n + b:8 + n + e]); return list(a), hdr[name]["shape"]
print("tensors:", {k: v["shape"] for k, v in hdr.items() if k != "__metadata__"}); print("meta:", meta)
mean = float(meta.get("pixel_mean", meta.get("mean", 0.2860))); std = float(meta.get("pixel_std", meta.get("std", 0.3530)))
f = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
lab = gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").read()[8 + idx]
px = f[16 + idx * 784:16 + (idx + 1) * 784]
img = [[(px[h * 28 + w] / 255.0 - mean) / std for w in range(28)] for h in range(28)]
bg = (0.0 - mean) / std
def conv(x, W, shp, bias):  # x: C x H x W lists; pad 1, stride 1
    OC, C, KH, KW = shp; H = len(x[0]); Wd = len(x[0][0]); out = []
    for o in range(OC):
        m = [[bias[o]] * Wd for _ in range(H)]
        for c in range(C):
            xc = x[c]
            for kh in range(3):
                for kw in range(3):
                    w = W[((o * C + c) * 3 + kh) * 3 + kw]
                    if w == 0: continue
                    for h in range(H):
                        ih = h - 1 + kh
                        if ih < 0 or ih >= H: continue
                        row = xc[ih]; mr = m[h]
                        for ww in range(max(0, 1 - kw), min(Wd, Wd + 1 - kw)):
                            mr[ww] += w * row[ww - 1 + kw]
        out.append(m)
    return out
relu = lambda x: [[[max(0.0, v) for v in r] for r in ch] for ch in x]
def pool(x):
    return [[[max(ch[2*h][2*w], ch[2*h][2*w+1], ch[2*h+1][2*w], ch[2*h+1][2*w+1]) for w in range(len(ch[0]) // 2)] for h in range(len(ch) // 2)] for ch in x]
names = sorted({k.split(".")[0] for k in hdr if k.startswith("conv")})
def forward(im):
    x = [im]; maps = []
    for nm in names:
        Wt, shp = T(nm + ".weight"); b, _ = T(nm + ".bias")
        x = conv(x, Wt, shp, b); maps.append(x); x = pool(relu(x))
    flat = [v for ch in x for r in ch for v in r]
    W1, s1 = T("fc1.weight"); b1, _ = T("fc1.bias"); W2, s2 = T("fc2.weight"); b2, _ = T("fc2.bias")
    h = [max(0.0, b1[o] + sum(W1[o * s1[1] + i] * flat[i] for i in range(s1[1]))) for o in range(s1[0])]
    z = [b2[o] + sum(W2[o * s2[1] + i] * h[i] for i in range(s2[1])) for o in range(s2[0])]
    return maps, z
def softmax(z):
    m = max(z); e = [math.exp(v - m) for v in z]; s = sum(e); return [v / s for v in e]
shifted = [[img[h][w - 1] if w >= 1 else bg for w in range(28)] for h in range(28)]  # one pixel right
m0, z0 = forward(img); m1, z1 = forward(shifted)
c0, c1 = m0[0], m1[0]
norm = lambda a: math.sqrt(sum(v * v for ch in a for r in ch for v in r))
diff = math.sqrt(sum((c1[o][h][w] - c0[o][h][w]) ** 2 for o in range(len(c0)) for h in range(28) for w in range(28)))
# equivariance: conv1(shift(x)) at column w vs conv1(x) at column w-1, away from the border (w in 2..26)
eq = max(abs(c1[o][h][w] - c0[o][h][w - 1]) for o in range(len(c0)) for h in range(28) for w in range(2, 27))
mx = max(abs(v) for ch in c0 for r in ch for v in r)
print(f"test image {idx}, label {lab}")
print(f"conv1 maps: ||conv1(shift x) - conv1(x)|| / ||conv1(x)|| = {diff / norm(c0):.3f} (unaligned)")
print(f"conv1 maps: max |conv1(shift x)[w] - conv1(x)[w-1]| away from the border = {eq:.2e} (max |conv1| {mx:.2f})")
p0, p1 = softmax(z0), softmax(z1)
dz = math.sqrt(sum((a - b) ** 2 for a, b in zip(z0, z1))); nz = math.sqrt(sum(a * a for a in z0))
print("logits x      :", " ".join(f"{v:.3f}" for v in z0))
print("logits shifted:", " ".join(f"{v:.3f}" for v in z1))
print(f"||dlogits|| / ||logits|| = {dz / nz:.4f}; max |dlogit| = {max(abs(a - b) for a, b in zip(z0, z1)):.4f}")
print(f"prediction {z0.index(max(z0))} (p {max(p0):.4f}) -> {z1.index(max(z1))} (p {max(p1):.4f})")
