// A compiled reference of the paper's Weston–Watkins trainer (paper 002, spec_002_walrus.md
// §2.2 Algorithm 1, §3.4 Walrus with lazy heaps, §4.1 stopping rule), written from the spec
// for tools/bench_ww.py: the C++ side of issue 13's "no more wall time than the authors'
// C++ Walrus". Not part of the package; the authors' LIBLINEAR fork is not reachable here.
//
// As the authors' solver: W (d x k, row-major) and beta (n x (k-1)) in RAM, no bias, no
// shrinking; every outer iteration a fresh uniform permutation (Fisher–Yates), each row's
// block minimized exactly by Walrus; after the iteration the timer is paused, P(W), D(beta)
// and the gap are computed, and the run stops at the first iteration with gap < delta * gap1.
// Walrus: the positive entries of v in a max-heap popped lazily, ENTRY/EXIT events merged
// from the popped (sorted) values, stop at the first state whose root gamma lies at or above
// the next breakpoint (spec §3.5's test, which cannot fail on rounding, on §3.4's lazy heaps).
//
//   g++ -O3 -march=native -o ww_ref tools/ww_ref.cpp
//   ww_ref TRAIN C DELTA MAX_ITER SEED [TEST]    -> one JSON line on stdout
//
// Times: "et" is the paper's elapsed time (training only, gap computations excluded);
// "wall" adds the gap computations (everything after reading the file).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

struct Data {
    std::vector<long> ptr{0};
    std::vector<int> idx;       // 0-based feature
    std::vector<double> val;
    std::vector<double> label;
    int d = 0;
};

static Data read_libsvm(const char *path) {
    FILE *f = std::fopen(path, "r");
    if (!f) { std::fprintf(stderr, "ww_ref: cannot open %s\n", path); std::exit(2); }
    Data D;
    long lineno = 0;
    std::string buf;
    char chunk[65536];
    while (true) {
        buf.clear();
        bool got = false;
        while (std::fgets(chunk, sizeof chunk, f)) {
            got = true;
            buf += chunk;
            if (!buf.empty() && buf.back() == '\n') break;
        }
        if (!got) break;
        ++lineno;
        char *s = buf.data();
        char *end;
        while (*s == ' ' || *s == '\t') ++s;
        if (*s == '\n' || *s == '\0' || *s == '#') continue;
        double lab = std::strtod(s, &end);
        if (end == s) { std::fprintf(stderr, "ww_ref: %s:%ld: bad label\n", path, lineno); std::exit(2); }
        s = end;
        while (true) {
            while (*s == ' ' || *s == '\t') ++s;
            if (*s == '\n' || *s == '\0' || *s == '#') break;
            long j = std::strtol(s, &end, 10);
            if (end == s || *end != ':' || j < 1) {
                std::fprintf(stderr, "ww_ref: %s:%ld: bad feature\n", path, lineno); std::exit(2);
            }
            s = end + 1;
            double a = std::strtod(s, &end);
            if (end == s) { std::fprintf(stderr, "ww_ref: %s:%ld: bad value\n", path, lineno); std::exit(2); }
            s = end;
            D.idx.push_back(int(j - 1));
            D.val.push_back(a);
            if (int(j) > D.d) D.d = int(j);
        }
        D.label.push_back(lab);
        D.ptr.push_back(long(D.idx.size()));
    }
    std::fclose(f);
    return D;
}

// Walrus: b (k-1) minimizes 1/2 b'(I + 11')b - v'b over [0, C]^(k-1); returns gamma = sum b.
struct Walrus {
    std::vector<double> heap, vs, P;
    explicit Walrus(int m) : heap(m), vs(m), P(m + 1) {}

    double solve(const double *v, int m, double C, double *b) {
        int p = 0;
        for (int s = 0; s < m; ++s)
            if (v[s] > 0) heap[p++] = v[s];
        if (p == 0) {
            for (int s = 0; s < m; ++s) b[s] = 0;
            return 0.0;
        }
        std::make_heap(heap.begin(), heap.begin() + p);
        int left = p, ie = 0, ix = 0;       // popped = ie; entered = ie, exited = ix
        P[0] = 0;
        double gam = 0;
        auto top = [&]() { return left > 0 ? heap[0] : 0.0; };
        while (true) {
            double nent = top();
            bool can_exit = ix < ie && vs[ix] > C;
            if (can_exit && (left == 0 || vs[ix] - C >= nent)) {
                ++ix;                                   // EXIT
            } else {                                    // ENTRY: pop the next largest
                std::pop_heap(heap.begin(), heap.begin() + left);
                --left;
                vs[ie] = heap[left];
                P[ie + 1] = P[ie] + vs[ie];
                ++ie;
            }
            int n = ix, mid = ie - ix;
            gam = (C * n + P[ie] - P[ix]) / (mid + 1);
            double nxt = std::max(top(), 0.0);
            if (ix < ie && vs[ix] > C) nxt = std::max(nxt, vs[ix] - C);
            if (gam >= nxt) break;
        }
        double tot = 0;
        for (int s = 0; s < m; ++s) {
            double t = v[s] - gam;
            b[s] = t < 0 ? 0 : (t > C ? C : t);
            tot += b[s];
        }
        return tot;
    }
};

int main(int argc, char **argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: ww_ref TRAIN C DELTA MAX_ITER SEED [TEST]\n");
        return 2;
    }
    Data X = read_libsvm(argv[1]);
    const double C = std::atof(argv[2]), delta = std::atof(argv[3]);
    const int max_iter = std::atoi(argv[4]);
    const unsigned long seed = std::strtoul(argv[5], nullptr, 10);
    const long n = long(X.label.size());
    std::map<double, int> classes;
    for (double l : X.label) classes.emplace(l, 0);
    int k = 0;
    for (auto &kv : classes) kv.second = k++;
    if (k < 2) { std::fprintf(stderr, "ww_ref: fewer than 2 classes\n"); return 2; }
    const int d = X.d, m = k - 1;
    std::vector<int> y(n);
    for (long i = 0; i < n; ++i) y[i] = classes[X.label[i]];

    auto t0 = std::chrono::steady_clock::now();
    std::vector<double> W(size_t(d) * k, 0.0), beta(size_t(n) * m, 0.0), gam(n, 0.0), q(n, 0.0);
    for (long i = 0; i < n; ++i)
        for (long p = X.ptr[i]; p < X.ptr[i + 1]; ++p) q[i] += X.val[p] * X.val[p];
    std::vector<long> perm(n);
    for (long i = 0; i < n; ++i) perm[i] = i;
    std::mt19937_64 rng(seed);
    std::vector<double> z(k), v(m), b(m), del(k);
    Walrus walrus(m);
    double et = 0, gap1 = 0, gap = 0, primal = 0, dual = 0;
    int iter = 0;
    bool converged = false;
    auto tick = std::chrono::steady_clock::now();
    for (iter = 1; iter <= max_iter; ++iter) {
        for (long i = 0; i < n; ++i) std::swap(perm[i], perm[i + long(rng() % (n - i))]);
        for (long t = 0; t < n; ++t) {
            const long i = perm[t];
            const int yi = y[i];
            double *bi = &beta[size_t(i) * m];
            if (q[i] == 0.0) {                          // spec §7.5 (b)
                for (int s = 0; s < m; ++s) bi[s] = C;
                gam[i] = C * m;
                continue;
            }
            std::fill(z.begin(), z.end(), 0.0);
            for (long p = X.ptr[i]; p < X.ptr[i + 1]; ++p) {
                const double a = X.val[p];
                const double *w = &W[size_t(X.idx[p]) * k];
                for (int c = 0; c < k; ++c) z[c] += a * w[c];
            }
            const double zy = z[yi];
            for (int s = 0; s < m; ++s) {
                const int c = s < yi ? s : s + 1;       // slot -> class, skipping y_i
                v[s] = bi[s] + gam[i] + (1.0 - (zy - z[c])) / q[i];
            }
            gam[i] = walrus.solve(v.data(), m, C, b.data());
            double tot = 0;
            bool changed = false;
            for (int s = 0; s < m; ++s) {
                const int c = s < yi ? s : s + 1;
                const double dl = b[s] - bi[s];
                del[c] = -dl;
                tot += dl;
                changed |= dl != 0.0;
                bi[s] = b[s];
            }
            del[yi] = tot;
            if (!changed) continue;
            for (long p = X.ptr[i]; p < X.ptr[i + 1]; ++p) {
                const double a = X.val[p];
                double *w = &W[size_t(X.idx[p]) * k];
                for (int c = 0; c < k; ++c)
                    if (del[c] != 0.0) w[c] += a * del[c];
            }
        }
        auto now = std::chrono::steady_clock::now();
        et += std::chrono::duration<double>(now - tick).count();
        // timer paused: P(W), D(beta), the gap (spec §4.1)
        double reg = 0, loss = 0, sg = 0;
        for (double w : W) reg += w * w;
        reg *= 0.5;
        for (long i = 0; i < n; ++i) {
            std::fill(z.begin(), z.end(), 0.0);
            for (long p = X.ptr[i]; p < X.ptr[i + 1]; ++p) {
                const double a = X.val[p];
                const double *w = &W[size_t(X.idx[p]) * k];
                for (int c = 0; c < k; ++c) z[c] += a * w[c];
            }
            for (int c = 0; c < k; ++c)
                if (c != y[i]) loss += std::max(0.0, 1.0 - (z[y[i]] - z[c]));
            sg += gam[i];
        }
        primal = reg + C * loss;
        dual = sg - reg;
        gap = primal - dual;
        if (iter == 1) gap1 = gap;
        tick = std::chrono::steady_clock::now();
        if (gap < delta * gap1) { converged = true; break; }
    }
    if (iter > max_iter) iter = max_iter;
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double acc = -1;
    if (argc > 6) {
        Data T = read_libsvm(argv[6]);
        long hit = 0, nt = long(T.label.size());
        for (long i = 0; i < nt; ++i) {
            std::fill(z.begin(), z.end(), 0.0);
            for (long p = T.ptr[i]; p < T.ptr[i + 1]; ++p) {
                if (T.idx[p] >= d) continue;
                const double a = T.val[p];
                const double *w = &W[size_t(T.idx[p]) * k];
                for (int c = 0; c < k; ++c) z[c] += a * w[c];
            }
            int best = int(std::max_element(z.begin(), z.end()) - z.begin());
            auto it = classes.find(T.label[i]);
            if (it != classes.end() && it->second == best) ++hit;
        }
        acc = nt ? double(hit) / nt : -1;
    }
    std::printf("{\"n\": %ld, \"d\": %d, \"k\": %d, \"iterations\": %d, \"converged\": %s, "
                "\"et\": %.6f, \"wall\": %.6f, \"gap1\": %.10g, \"gap\": %.10g, "
                "\"primal\": %.12g, \"dual\": %.12g, \"test_accuracy\": %.6f}\n",
                n, d, k, iter, converged ? "true" : "false", et, wall, gap1, gap, primal,
                dual, acc);
    return 0;
}
