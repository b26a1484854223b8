// splitc.hpp -- Split-C's global pointers and spread arrays for C++ (header-only, over
// splitc.h), so that a ported Split-C program reads like the original:
//
//   Split-C                         C++ with splitc.hpp
//   int *global p = toglobal(q, &x) splitc::global_ptr<int> p(q, &x);
//   y = *p;  *p = y;  p[i] = y;     the same (a blocking read, a blocking write)
//   y := *p;  *p := y;  sync();     get(y, p);  put(p, y);  sync();
//   *p :- y;  all_store_sync();     store(p, y);  all_store_sync();
//   int A[n]::;  A[i] = v;          splitc::spread_array<int> A(n);  A[i] = v;
//
// Any trivially copyable T works: the seven basic types (and their unsigned forms, bool)
// through the scalar calls (read_int, put_double, ...), anything else (a struct) through
// the bulk calls. A global_ptr<T> converts to gptr_t (so every call of splitc.h takes it)
// and is made from one explicitly. Pointer arithmetic moves the address within the same
// process, as gptr_add does; spread_array's operator[] goes across processes.
//
// get, put and store of a struct (bulk calls) read or fill the caller's object until the
// operation completes (sync(); store_sync / all_store_sync at the owner), as bulk_get,
// bulk_put and bulk_store do: they take lvalues only. Scalars are copied at the call.
// docs/splitc.md, "The C++ header".
#ifndef SPLITC_HPP
#define SPLITC_HPP

#if __cplusplus < 201703L
#error "splitc.hpp needs C++17 or later"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "splitc.h"

namespace splitc {

template <class T>
class global_ptr;
template <class T>
class global_ref;

namespace detail {

// The C type whose calls carry T (void: none, the bulk calls do).
template <class T> struct carrier { using type = void; };
template <> struct carrier<char> { using type = char; };
template <> struct carrier<signed char> { using type = char; };
template <> struct carrier<unsigned char> { using type = char; };
template <> struct carrier<bool> { using type = char; };
template <> struct carrier<short> { using type = short; };
template <> struct carrier<unsigned short> { using type = short; };
template <> struct carrier<int> { using type = int; };
template <> struct carrier<unsigned int> { using type = int; };
template <> struct carrier<long> { using type = long; };
template <> struct carrier<unsigned long> { using type = long; };
template <> struct carrier<long long> { using type = long long; };
template <> struct carrier<unsigned long long> { using type = long long; };
template <> struct carrier<float> { using type = float; };
template <> struct carrier<double> { using type = double; };

// The scalar calls of one C type.
template <class C> struct calls;
#define SPLITC_HPP_CALLS(C, name)                                              \
    template <> struct calls<C> {                                              \
        static C read(gptr_t g) { return ::read_##name(g); }                   \
        static void write(gptr_t g, C v) { ::write_##name(g, v); }             \
        static void get(C* d, gptr_t g) { ::get_##name(d, g); }                \
        static void put(gptr_t g, C v) { ::put_##name(g, v); }                 \
        static void store(gptr_t g, C v) { ::store_##name(g, v); }             \
    };
SPLITC_HPP_CALLS(char, char)
SPLITC_HPP_CALLS(short, short)
SPLITC_HPP_CALLS(int, int)
SPLITC_HPP_CALLS(long, long)
SPLITC_HPP_CALLS(long long, longlong)
SPLITC_HPP_CALLS(float, float)
SPLITC_HPP_CALLS(double, double)
#undef SPLITC_HPP_CALLS

template <class T>
using carrier_t = typename carrier<std::remove_cv_t<T>>::type;
template <class T>
constexpr bool is_scalar_v = !std::is_void_v<carrier_t<T>>;

template <class T>
void check_type() {
    static_assert(std::is_trivially_copyable_v<T>, "splitc.hpp moves values as bytes: T must be trivially copyable");
}

template <class To, class From>
To bits(const From& f) {
    static_assert(sizeof(To) == sizeof(From));
    To t;
    std::memcpy(&t, &f, sizeof t);
    return t;
}

template <class T>
T read(gptr_t g) {
    check_type<T>();
    if constexpr (is_scalar_v<T>) {
        return bits<std::remove_cv_t<T>>(calls<carrier_t<T>>::read(g));
    } else {
        std::remove_cv_t<T> v;
        ::bulk_read(&v, g, sizeof v);
        return v;
    }
}
template <class T>
void write(gptr_t g, const T& v) {
    check_type<T>();
    if constexpr (is_scalar_v<T>)
        calls<carrier_t<T>>::write(g, bits<carrier_t<T>>(v));
    else
        ::bulk_write(g, &v, sizeof v);
}
template <class T>
void get(T& dst, gptr_t g) {
    check_type<T>();
    // A signed or unsigned form of the carrier (or a char) may be accessed as it.
    if constexpr (is_scalar_v<T>)
        calls<carrier_t<T>>::get(reinterpret_cast<carrier_t<T>*>(&dst), g);
    else
        ::bulk_get(&dst, g, sizeof dst);
}
template <class T>
void put(gptr_t g, const T& v) {
    check_type<T>();
    if constexpr (is_scalar_v<T>)
        calls<carrier_t<T>>::put(g, bits<carrier_t<T>>(v));
    else
        ::bulk_put(g, &v, sizeof v);
}
template <class T>
void store(gptr_t g, const T& v) {
    check_type<T>();
    if constexpr (is_scalar_v<T>)
        calls<carrier_t<T>>::store(g, bits<carrier_t<T>>(v));
    else
        ::bulk_store(g, &v, sizeof v);
}

}  // namespace detail

// ---- global_ref<T>: what *p and p[i] give -----------------------------------------------
// Reading it (conversion to T) is a blocking read; assigning to it a blocking write. The
// compound assignments read, then write (not atomic: as Split-C's *p += v; use
// atomic_fetch_add_long or atomic_call for that).
template <class T>
class global_ref {
public:
    explicit global_ref(gptr_t g) : g_(g) {}
    global_ref(const global_ref&) = default;

    operator T() const { return detail::read<T>(g_); }
    T value() const { return detail::read<T>(g_); }
    global_ref& operator=(const T& v) {
        detail::write<T>(g_, v);
        return *this;
    }
    global_ref& operator=(const global_ref& o) { return *this = o.value(); }  // *p = *q copies the value
    global_ptr<T> operator&() const { return global_ptr<T>(g_); }

#define SPLITC_HPP_COMPOUND(op)                       \
    template <class U>                                \
    global_ref& operator op##=(const U& v) {          \
        return *this = static_cast<T>(value() op v);  \
    }
    SPLITC_HPP_COMPOUND(+)
    SPLITC_HPP_COMPOUND(-)
    SPLITC_HPP_COMPOUND(*)
    SPLITC_HPP_COMPOUND(/)
    SPLITC_HPP_COMPOUND(%)
    SPLITC_HPP_COMPOUND(&)
    SPLITC_HPP_COMPOUND(|)
    SPLITC_HPP_COMPOUND(^)
#undef SPLITC_HPP_COMPOUND
    global_ref& operator++() { return *this += 1; }
    global_ref& operator--() { return *this -= 1; }
    T operator++(int) {
        T old = value();
        *this = static_cast<T>(old + 1);
        return old;
    }
    T operator--(int) {
        T old = value();
        *this = static_cast<T>(old - 1);
        return old;
    }

private:
    gptr_t g_;
};

// ---- global_ptr<T>: a typed gptr_t ------------------------------------------------------
template <class T>
class global_ptr {
public:
    using element_type = T;
    using value_type = std::remove_cv_t<T>;
    using difference_type = std::ptrdiff_t;
    using reference = global_ref<T>;

    global_ptr() = default;  // null: process 0, address 0
    global_ptr(std::nullptr_t) {}
    global_ptr(int proc, T* addr) : g_(::toglobal(proc, addr)) {}
    explicit global_ptr(gptr_t g) : g_(g) {}
    // A pointer to T converts to a pointer to const T, as T* does.
    template <class U, class = std::enable_if_t<std::is_convertible_v<U*, T*>>>
    global_ptr(const global_ptr<U>& o) : g_(o.raw()) {}

    operator gptr_t() const { return g_; }
    gptr_t raw() const { return g_; }
    int proc() const { return ::toproc(g_); }
    T* addr() const { return static_cast<T*>(::toaddr(g_)); }  // valid in process proc()
    bool is_local() const { return ::is_local(g_); }
    T* local() const { return static_cast<T*>(::tolocal(g_)); }  // nullptr unless local
    explicit operator bool() const { return g_.bits != 0; }

    global_ref<T> operator*() const { return global_ref<T>(g_); }
    global_ref<T> operator[](std::ptrdiff_t i) const { return *(*this + i); }

    global_ptr& operator+=(std::ptrdiff_t n) {
        g_ = ::gptr_add(g_, n * static_cast<std::ptrdiff_t>(sizeof(T)));
        return *this;
    }
    global_ptr& operator-=(std::ptrdiff_t n) { return *this += -n; }
    global_ptr& operator++() { return *this += 1; }
    global_ptr& operator--() { return *this -= 1; }
    global_ptr operator++(int) {
        global_ptr old = *this;
        *this += 1;
        return old;
    }
    global_ptr operator--(int) {
        global_ptr old = *this;
        *this -= 1;
        return old;
    }
    friend global_ptr operator+(global_ptr p, std::ptrdiff_t n) { return p += n; }
    friend global_ptr operator+(std::ptrdiff_t n, global_ptr p) { return p += n; }
    friend global_ptr operator-(global_ptr p, std::ptrdiff_t n) { return p -= n; }
    // Elements between two pointers into the same process.
    friend std::ptrdiff_t operator-(global_ptr a, global_ptr b) {
        return (reinterpret_cast<std::intptr_t>(a.addr()) - reinterpret_cast<std::intptr_t>(b.addr())) /
               static_cast<std::ptrdiff_t>(sizeof(T));
    }
    // Ordered by process, then address.
    friend bool operator==(global_ptr a, global_ptr b) { return a.g_.bits == b.g_.bits; }
    friend bool operator!=(global_ptr a, global_ptr b) { return a.g_.bits != b.g_.bits; }
    friend bool operator<(global_ptr a, global_ptr b) { return a.g_.bits < b.g_.bits; }
    friend bool operator<=(global_ptr a, global_ptr b) { return a.g_.bits <= b.g_.bits; }
    friend bool operator>(global_ptr a, global_ptr b) { return a.g_.bits > b.g_.bits; }
    friend bool operator>=(global_ptr a, global_ptr b) { return a.g_.bits >= b.g_.bits; }

private:
    gptr_t g_{0};
};

template <class T>
global_ptr<T> to_global(int proc, T* addr) {
    return global_ptr<T>(proc, addr);
}

// ---- split-phase and signalling accesses ----------------------------------------------
// get(x, p): x := *p; put(p, x): *p := x (both completed by sync()); store(p, x): *p :- x.
template <class T>
void get(T& dst, global_ptr<T> src) { detail::get<T>(dst, src.raw()); }
template <class T>
void get(T& dst, global_ptr<const T> src) { detail::get<T>(dst, src.raw()); }
template <class T>
void get(T& dst, global_ref<T> src) { detail::get<T>(dst, (&src).raw()); }
template <class T, class V>
void put(global_ptr<T> dst, const V& v) {
    if constexpr (detail::is_scalar_v<T>)
        detail::put<T>(dst.raw(), static_cast<T>(v));
    else
        detail::put<T>(dst.raw(), v);
}
template <class T, class V>
void put(global_ref<T> dst, const V& v) { put(&dst, v); }
template <class T, class V>
void store(global_ptr<T> dst, const V& v) {
    if constexpr (detail::is_scalar_v<T>)
        detail::store<T>(dst.raw(), static_cast<T>(v));
    else
        detail::store<T>(dst.raw(), v);
}
template <class T, class V>
void store(global_ref<T> dst, const V& v) { store(&dst, v); }
// A struct's bytes are read until the operation completes: no temporaries.
template <class T, class V, class = std::enable_if_t<!detail::is_scalar_v<T>>>
void put(global_ptr<T>, const V&&) = delete;
template <class T, class V, class = std::enable_if_t<!detail::is_scalar_v<T>>>
void store(global_ptr<T>, const V&&) = delete;
template <class T, class V, class = std::enable_if_t<!detail::is_scalar_v<T>>>
void put(global_ref<T>, const V&&) = delete;
template <class T, class V, class = std::enable_if_t<!detail::is_scalar_v<T>>>
void store(global_ref<T>, const V&&) = delete;

// Arrays of count elements (the bulk calls; count is in elements, not bytes).
template <class T>
void read_n(T* dst, global_ptr<const T> src, std::size_t count) { ::bulk_read(dst, src.raw(), count * sizeof(T)); }
template <class T>
void write_n(global_ptr<T> dst, const T* src, std::size_t count) { ::bulk_write(dst.raw(), src, count * sizeof(T)); }
template <class T>
void get_n(T* dst, global_ptr<const T> src, std::size_t count) { ::bulk_get(dst, src.raw(), count * sizeof(T)); }
template <class T>
void put_n(global_ptr<T> dst, const T* src, std::size_t count) { ::bulk_put(dst.raw(), src, count * sizeof(T)); }
template <class T>
void store_n(global_ptr<T> dst, const T* src, std::size_t count) { ::bulk_store(dst.raw(), src, count * sizeof(T)); }
// (read_n and get_n take a global_ptr<const T>; a global_ptr<T> converts to it, but a
// template argument is not deduced through a conversion: these overloads do it.)
template <class T>
void read_n(T* dst, global_ptr<T> src, std::size_t count) { read_n(dst, global_ptr<const T>(src), count); }
template <class T>
void get_n(T* dst, global_ptr<T> src, std::size_t count) { get_n(dst, global_ptr<const T>(src), count); }

// ---- spread_array<T>: Split-C's T A[n]:: (block 1) or T A[n]::[block] ---------------------
// Element i is in block i / block, and block b lives on process b % PROCS at local offset
// (b / PROCS) * block elements (all_spread_malloc's layout). Making and destroying one are
// collectives: every process makes the same ones in the same order. Zeroed at start.
template <class T>
class spread_array {
public:
    spread_array() = default;
    explicit spread_array(std::size_t n, std::size_t block = 1) : n_(n), block_(block ? block : 1) {
        detail::check_type<T>();
        base_ = static_cast<T*>(::all_spread_malloc(blocks(), block_ * sizeof(T)));
        if (!base_) throw std::bad_alloc();  // in every process: the heap is the same everywhere
    }
    ~spread_array() {
        if (base_) ::all_spread_free(base_);
    }
    spread_array(const spread_array&) = delete;
    spread_array& operator=(const spread_array&) = delete;
    spread_array(spread_array&& o) noexcept { swap(o); }
    spread_array& operator=(spread_array&& o) noexcept {
        spread_array t(std::move(o));
        swap(t);
        return *this;
    }
    void swap(spread_array& o) noexcept {
        std::swap(base_, o.base_);
        std::swap(n_, o.n_);
        std::swap(block_, o.block_);
    }

    std::size_t size() const { return n_; }
    std::size_t block() const { return block_; }
    global_ptr<T> ptr(std::size_t i) const {
        const gptr_t b = ::spread_gptr(base_, block_ * sizeof(T), i / block_);
        return global_ptr<T>(::gptr_add(b, static_cast<std::ptrdiff_t>((i % block_) * sizeof(T))));
    }
    global_ref<T> operator[](std::size_t i) const { return *ptr(i); }
    int owner(std::size_t i) const { return static_cast<int>((i / block_) % static_cast<std::size_t>(PROCS)); }
    bool is_local(std::size_t i) const { return owner(i) == MYPROC; }

    // This process's elements, one block after another: local()[j] is element
    // global_index(j), for j < local_size().
    T* local() const { return base_; }
    std::size_t local_size() const {
        const std::size_t P = static_cast<std::size_t>(PROCS), me = static_cast<std::size_t>(MYPROC);
        const std::size_t nb = blocks();
        if (nb <= me) return 0;
        const std::size_t mine = (nb - 1 - me) / P + 1;
        std::size_t n = mine * block_;
        if ((nb - 1) % P == me) n -= nb * block_ - n_;  // the last block is ours and short
        return n;
    }
    std::size_t global_index(std::size_t j) const {
        const std::size_t P = static_cast<std::size_t>(PROCS), me = static_cast<std::size_t>(MYPROC);
        return ((j / block_) * P + me) * block_ + j % block_;
    }

private:
    std::size_t blocks() const { return n_ / block_ + (n_ % block_ != 0); }
    T* base_ = nullptr;
    std::size_t n_ = 0, block_ = 1;
};

}  // namespace splitc

#endif  // SPLITC_HPP
