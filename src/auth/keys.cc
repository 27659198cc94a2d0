// Ed25519 keys through OpenSSL's EVP interface (keys.h).
#include "auth/keys.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>
#include <vector>

#include "auth/auth_errors.h"

namespace rmsg::auth {

namespace detail {
void PkeyFree::operator()(evp_pkey_st* p) const noexcept {
  EVP_PKEY_free(p);
}
}  // namespace detail

namespace {

struct BioFree {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool raw_public(EVP_PKEY* key, PublicKey& out) {
  std::size_t len = out.size();
  return EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(out.data()), &len) ==
             1 &&
         len == out.size();
}

}  // namespace

PrivateKey::PrivateKey(detail::Pkey key) : key_(std::move(key)) {
  raw_public(key_.get(), public_);
}

Result<PrivateKey> PrivateKey::load(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) return make_error_code(AuthErrc::key_file);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 16384) {
    return make_error_code(AuthErrc::key_file);
  }
  // Like ssh: a private key others may read is no longer only this node's.
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) return make_error_code(AuthErrc::key_permissions);
  std::vector<char> text(static_cast<std::size_t>(st.st_size));
  std::size_t have = 0;
  while (have < text.size()) {
    const ssize_t n = ::read(f.fd, text.data() + have, text.size() - have);
    if (n <= 0) return make_error_code(AuthErrc::key_file);
    have += static_cast<std::size_t>(n);
  }
  auto key = from_pem(std::string_view(text.data(), text.size()));
  OPENSSL_cleanse(text.data(), text.size());
  return key;
}

Result<PrivateKey> PrivateKey::from_pem(std::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return make_error_code(AuthErrc::key_file);
  detail::Pkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return make_error_code(AuthErrc::key_file);
  }
  return PrivateKey(std::move(key));
}

Result<PrivateKey> PrivateKey::create(const std::string& path) {
  detail::Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) return make_error_code(AuthErrc::key_file);
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return make_error_code(AuthErrc::key_file);
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  Fd f{::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (f.fd < 0) return std::error_code(errno, std::system_category());
  std::size_t done = 0;
  while (done < static_cast<std::size_t>(len)) {
    const ssize_t n = ::write(f.fd, data + done, static_cast<std::size_t>(len) - done);
    if (n <= 0) return std::error_code(errno, std::system_category());
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(f.fd) != 0) return std::error_code(errno, std::system_category());
  return PrivateKey(std::move(key));
}

Result<Signature> PrivateKey::sign(std::span<const std::byte> message) const {
  MdCtx ctx(EVP_MD_CTX_new());
  Signature sig{};
  std::size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      len != sig.size()) {
    return make_error_code(Errc::resource_exhausted);
  }
  return sig;
}

Result<Verifier> Verifier::make(const PublicKey& key) {
  detail::Pkey pkey(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(key.data()), key.size()));
  if (!pkey) return make_error_code(AuthErrc::keyring);
  return Verifier(std::move(pkey), key);
}

bool Verifier::verify(std::span<const std::byte> message, const Signature& signature) const {
  MdCtx ctx(EVP_MD_CTX_new());
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

Result<Nonce> random_nonce() {
  Nonce n{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) {
    return make_error_code(Errc::resource_exhausted);
  }
  return n;
}

std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::byte b : bytes) {
    const auto v = std::to_integer<unsigned>(b);
    out.push_back(kDigits[v >> 4]);
    out.push_back(kDigits[v & 15]);
  }
  return out;
}

bool from_hex(std::string_view hex, std::span<std::byte> out) {
  if (hex.size() != out.size() * 2) return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = digit(hex[2 * i]);
    const int lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::byte>(hi * 16 + lo);
  }
  return true;
}

}  // namespace rmsg::auth
