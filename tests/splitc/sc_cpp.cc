// sc_cpp -- splitc.hpp, all of it: global_ptr<T> for the seven basic types, their unsigned
// forms, bool and a struct (*p reads, *p = v writes, get(x, p), put(p, x), store(p, x),
// p[i], p + i, ++, --, p - q, comparisons, conversion to and from gptr_t, proc, addr,
// is_local, local), global_ref's compound assignments, the _n array calls, and
// spread_array (cyclic and blocked: operator[], ptr, owner, local view, move). <iostream>
// comes after the header: its members named sync must survive splitc.h's sync() macro.
#include <splitc.hpp>

#include <cfloat>
#include <climits>
#include <iostream>
#include <sstream>
#include <string>

#define CHECK(cond, what)                                                                              \
    do {                                                                                               \
        checks++;                                                                                      \
        if (!(cond)) {                                                                                 \
            std::cout.flush();                                                                         \
            std::cerr << __FILE__ << ":" << __LINE__ << ": process " << MYPROC << " of " << PROCS << " (" \
                      << splitc_backend() << "): check failed: " #cond ": " << what << std::endl;     \
            splitc_exit(1);                                                                            \
        }                                                                                              \
    } while (0)

using splitc::global_ptr;
using splitc::spread_array;

static long checks;
constexpr int kMaxP = 16;

struct Odd {  // 24 bytes with padding; compared field by field
    char c;
    double d;
    short s;
    bool operator==(const Odd& o) const { return c == o.c && d == o.d && s == o.s; }
};

// Every process owns one row per type: row[writer][slot].
template <class T>
struct Rows {
    static T src[4];
    static T dst[kMaxP][4];
};
template <class T>
T Rows<T>::src[4];
template <class T>
T Rows<T>::dst[kMaxP][4];

template <class T>
T val(int tag, int k);
template <class T>
T val(int tag, int k) {
    if constexpr (std::is_same_v<T, Odd>) {
        return Odd{static_cast<char>('a' + tag + k), 0.5 * tag + k, static_cast<short>(-1000 * k - tag)};
    } else if constexpr (std::is_same_v<T, bool>) {
        return ((tag + k) & 1) != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
        return static_cast<T>((k & 1 ? -1 : 1) * (tag * 1024.25 + k + 1.0 / 3));
    } else {
        // all bytes differ, the top bit set for odd k
        unsigned long long v = 0x0123456789ABCDEFull + static_cast<unsigned long long>(tag) * 0x0101010101010101ull + k;
        if (k & 1) v |= 1ull << (sizeof(T) * 8 - 1);
        T t;
        std::memcpy(&t, &v, sizeof t);  // the low bytes (little-endian)
        return t;
    }
}

template <class T>
bool same(const T& a, const T& b) {
    if constexpr (std::is_same_v<T, Odd>)
        return a == b;
    else
        return std::memcmp(&a, &b, sizeof a) == 0;
}

template <class T>
void test_type(const char* name) {
    auto& src = Rows<T>::src;
    auto& dst = Rows<T>::dst;
    for (int k = 0; k < 4; k++) src[k] = val<T>(MYPROC, k);
    for (auto& row : dst)
        for (int k = 0; k < 4; k++) row[k] = val<T>(99, k);
    barrier();
    for (int i = 0; i < PROCS; i++) {
        const int q = (MYPROC + 1 + i) % PROCS;
        global_ptr<T> p(q, &src[0]);
        CHECK(p.proc() == q && p.addr() == &src[0] && p.is_local() == (q == MYPROC), name << " pointer parts");
        CHECK(p.local() == (q == MYPROC ? &src[0] : nullptr), name << " local()");
        // *p, p[i], p + i, ++, --
        T v = *p;
        CHECK(same(v, val<T>(q, 0)), name << ": *p from " << q);
        CHECK(same(static_cast<T>(p[3]), val<T>(q, 3)), name << ": p[3]");
        CHECK(same(static_cast<T>(*(p + 2)), val<T>(q, 2)), name << ": *(p + 2)");
        global_ptr<T> r = p;
        ++r;
        CHECK(same(static_cast<T>(*r), val<T>(q, 1)), name << ": ++p");
        global_ptr<T> old = r++;
        CHECK(old == p + 1 && r == p + 2 && r - p == 2 && p - r == -2, name << ": p++ and p - q");
        r--;
        --r;
        CHECK(r == p && !(r != p) && r < p + 1 && p + 1 > r && r <= p && r >= p, name << ": comparisons");
        // gptr_t both ways
        gptr_t g = p;
        CHECK(toproc(g) == q && toaddr(g) == &src[0] && global_ptr<T>(g) == p, name << ": gptr_t");
        global_ptr<const T> pc = p;  // to const, as T* to const T*
        CHECK(same(static_cast<T>(pc[1]), val<T>(q, 1)), name << ": global_ptr<const T>");
        // get(x, p) and get into several values, one sync
        T got[4];
        for (int k = 0; k < 4; k++) splitc::get(got[k], p + k);
        sync();
        for (int k = 0; k < 4; k++) CHECK(same(got[k], val<T>(q, k)), name << ": get slot " << k << " from " << q);
        // *p = v, put(p, x), store(p, x): into our row at q
        global_ptr<T> d(q, &dst[MYPROC][0]);
        d[0] = val<T>(MYPROC * kMaxP + q, 0);
        const T pv = val<T>(MYPROC * kMaxP + q, 1), sv = val<T>(MYPROC * kMaxP + q, 2);
        splitc::put(d + 1, pv);
        splitc::store(d + 2, sv);
        sync();
        all_store_sync();  // pv and sv stay alive until here (a struct's bytes are read until then)
    }
    barrier();
    for (int w = 0; w < PROCS; w++) {
        for (int k = 0; k < 4; k++) {
            const T want = k < 3 ? val<T>(w * kMaxP + MYPROC, k) : val<T>(99, k);
            CHECK(same(dst[w][k], want), name << ": slot " << k << " written by " << w);
        }
    }
    barrier();
}

long ring[4 * kMaxP];

int splitc_main(int, char**) {
    CHECK(PROCS <= kMaxP, "at most " << kMaxP << " processes");
    test_type<char>("char");
    test_type<signed char>("signed char");
    test_type<unsigned char>("unsigned char");
    test_type<bool>("bool");
    test_type<short>("short");
    test_type<unsigned short>("unsigned short");
    test_type<int>("int");
    test_type<unsigned>("unsigned");
    test_type<long>("long");
    test_type<unsigned long>("unsigned long");
    test_type<long long>("long long");
    test_type<unsigned long long>("unsigned long long");
    test_type<float>("float");
    test_type<double>("double");
    test_type<Odd>("struct Odd");

    // null, bool conversion, to_global
    global_ptr<long> null;
    CHECK(!null && null == nullptr && global_ptr<long>(nullptr) == null, "null global_ptr");
    const int right = (MYPROC + 1) % PROCS;
    auto rp = splitc::to_global(right, &ring[0]);
    CHECK(rp && rp.proc() == right, "to_global");

    // compound assignments through global references (read, then write)
    barrier();
    global_ptr<long> mine(right, &ring[MYPROC]);
    *mine = 10;
    *mine += 5;
    *mine -= 2;
    *mine *= 3;
    *mine |= 0x100;
    ++*mine;
    long before = (*mine)++;
    CHECK(before == ((13 * 3) | 0x100) + 1, "compound assignments: " << before);
    barrier();
    const int left = (MYPROC + PROCS - 1) % PROCS;
    CHECK(ring[left] == before + 1, "compound assignments landed: " << ring[left]);
    // *p = *q copies the value, not the reference
    global_ptr<long> a(right, &ring[kMaxP + MYPROC]), b(right, &ring[MYPROC]);
    *a = *b;
    CHECK(static_cast<long>(*a) == before + 1, "*a = *b");
    barrier();

    // the _n calls: arrays of elements
    {
        long* blk = static_cast<long*>(all_malloc(sizeof(long) * 64));
        long out[64], in[64];
        for (int i = 0; i < 64; i++) out[i] = 1000L * MYPROC + i;
        global_ptr<long> there(right, blk);
        splitc::put_n(there, out, 16);
        sync();
        splitc::write_n(there + 16, out + 16, 16);
        splitc::store_n(there + 32, out + 32, 32);
        all_store_sync();
        for (int i = 0; i < 64; i++) CHECK(blk[i] == 1000L * left + i, "_n calls: element " << i << " = " << blk[i]);
        splitc::get_n(in, there, 32);
        sync();
        splitc::read_n(in + 32, global_ptr<const long>(there + 32), 32);
        for (int i = 0; i < 64; i++) CHECK(in[i] == 1000L * MYPROC + i, "get_n/read_n: element " << i);
        barrier();
        all_free(blk);
    }

    // spread arrays: cyclic ints, filled by assignment and stores, read by []
    {
        const std::size_t n = 100 * static_cast<std::size_t>(PROCS) + 3;
        spread_array<int> A(n);
        CHECK(A.size() == n && A.block() == 1, "spread_array size");
        std::size_t count = 0;
        for (std::size_t j = 0; j < A.local_size(); j++) {
            CHECK(A.local()[j] == 0, "zeroed");
            CHECK(A.is_local(A.global_index(j)), "global_index " << A.global_index(j));
            count++;
        }
        CHECK(all_reduce_to_all_add_long(static_cast<long>(count)) == static_cast<long>(n), "local sizes add up");
        barrier();
        for (std::size_t i = 0; i < n; i++) {
            if ((i + 1) % static_cast<std::size_t>(PROCS) != static_cast<std::size_t>(MYPROC)) continue;
            if (i % 2)
                A[i] = static_cast<int>(i * 7);  // a blocking write
            else
                splitc::store(A[i], i * 7);  // a store through the reference
        }
        all_store_sync();
        for (std::size_t j = 0; j < A.local_size(); j++)
            CHECK(A.local()[j] == static_cast<int>(A.global_index(j) * 7), "local element " << j);
        for (std::size_t i = static_cast<std::size_t>(MYPROC); i < n; i += 5) {
            CHECK(A.owner(i) == static_cast<int>(i % static_cast<std::size_t>(PROCS)), "owner");
            CHECK(A[i] == static_cast<int>(i * 7), "A[" << i << "] = " << static_cast<int>(A[i]));
        }
        int x = 0;
        splitc::get(x, A[n - 1]);
        sync();
        CHECK(x == static_cast<int>((n - 1) * 7), "get(x, A[n-1])");
        barrier();
        // blocked: doubles in blocks of 16, moved into another array
        spread_array<double> B(16 * static_cast<std::size_t>(PROCS) * 3 + 5, 16);
        CHECK(all_reduce_to_all_add_long(static_cast<long>(B.local_size())) == static_cast<long>(B.size()),
              "blocked local sizes add up (" << B.local_size() << " here)");
        for (std::size_t j = 0; j < B.local_size(); j++) {
            CHECK(B.global_index(j) < B.size() && B.is_local(B.global_index(j)), "blocked global_index " << j);
            B.local()[j] = 0.25 * static_cast<double>(B.global_index(j));
        }
        barrier();
        for (std::size_t i = 0; i < B.size(); i += 7) {
            CHECK(B.owner(i) == static_cast<int>((i / 16) % static_cast<std::size_t>(PROCS)), "blocked owner " << i);
            CHECK(B[i] == 0.25 * static_cast<double>(i), "B[" << i << "] = " << static_cast<double>(B[i]));
        }
        spread_array<double> C(std::move(B));
        CHECK(C.size() == 16 * static_cast<std::size_t>(PROCS) * 3 + 5 && B.size() == 0, "move");
        CHECK(C[C.size() - 1] == 0.25 * static_cast<double>(C.size() - 1), "after the move");
        barrier();
    }  // the arrays are freed here, in the same order everywhere

    // std::ostringstream (a stream buffer with a sync member) works next to the macro
    std::ostringstream os;
    os << "sc_cpp: process " << MYPROC << " of " << PROCS << " (" << splitc_backend() << "): " << checks
       << " checks passed";
    std::cout << os.str() << std::endl;
    return 0;
}
