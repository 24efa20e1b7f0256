// Implements: the torch.save reader: a minimal zip reader (stored entries, zip64 aware) and a
// pickle VM subset (protocols 2-4) that rebuilds tensors from their storages.
#include "detseg/io/pth_reader.h"

#include <ATen/ATen.h>

#include <cstring>
#include <functional>
#include <map>
#include <string_view>
#include <unordered_map>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {
namespace {

uint64_t le(std::string_view data, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<uint8_t>(data[at + i])) << (8 * i);
  return v;
}

// ---- zip: the central directory gives names and offsets; entries must be stored uncompressed.
class ZipReader {
 public:
  ZipReader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {
    const size_t eocd = find_eocd();
    uint64_t count = le(data_, eocd + 10, 2);
    uint64_t cd_offset = le(data_, eocd + 16, 4);
    if (count == 0xFFFF || cd_offset == 0xFFFFFFFFu) {  // zip64: locator sits just before EOCD
      need(eocd >= 20 && le(data_, eocd - 20, 4) == 0x07064b50, "zip64 locator missing");
      const uint64_t z64 = le(data_, eocd - 20 + 8, 8);
      need(z64 + 56 <= data_.size() && le(data_, z64, 4) == 0x06064b50, "zip64 record missing");
      count = le(data_, z64 + 32, 8);
      cd_offset = le(data_, z64 + 48, 8);
    }
    size_t p = cd_offset;
    for (uint64_t n = 0; n < count; ++n) {
      need(p + 46 <= data_.size() && le(data_, p, 4) == 0x02014b50, "central directory damaged");
      Entry e;
      e.method = static_cast<uint32_t>(le(data_, p + 10, 2));
      e.size = le(data_, p + 24, 4);
      uint64_t comp_size = le(data_, p + 20, 4);
      const size_t name_len = le(data_, p + 28, 2), extra_len = le(data_, p + 30, 2),
                   comment_len = le(data_, p + 32, 2);
      e.local = le(data_, p + 42, 4);
      need(p + 46 + name_len + extra_len + comment_len <= data_.size(),
           "central directory damaged");
      const std::string name(data_.substr(p + 46, name_len));
      // Zip64 extra field (id 1) holds, in order, the 32-bit fields that overflowed.
      for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
        const uint64_t id = le(data_, x, 2), len = le(data_, x + 2, 2);
        size_t v = x + 4;
        if (id == 1) {
          if (e.size == 0xFFFFFFFFu && v + 8 <= x + 4 + len) e.size = le(data_, v, 8), v += 8;
          if (comp_size == 0xFFFFFFFFu && v + 8 <= x + 4 + len) comp_size = le(data_, v, 8), v += 8;
          if (e.local == 0xFFFFFFFFu && v + 8 <= x + 4 + len) e.local = le(data_, v, 8);
        }
        x += 4 + len;
      }
      e.comp_size = comp_size;
      entries_[name] = e;
      p += 46 + name_len + extra_len + comment_len;
    }
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : entries_) out.push_back(kv.first);
    return out;
  }
  bool has(const std::string& name) const { return entries_.count(name) > 0; }

  std::string_view read(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) throw Error(str(what_, ": zip entry '", name, "' missing"));
    const Entry& e = it->second;
    if (e.method != 0)
      throw Error(str(what_, ": zip entry '", name, "' is compressed (method ", e.method,
                      "); torch.save writes stored entries, re-save the file with torch.save"));
    need(e.local + 30 <= data_.size() && le(data_, e.local, 4) == 0x04034b50,
         str("local header of '", name, "' damaged"));
    const size_t start = e.local + 30 + le(data_, e.local + 26, 2) + le(data_, e.local + 28, 2);
    need(e.comp_size == e.size && start + e.size <= data_.size(),
         str("entry '", name, "' truncated"));
    return data_.substr(start, e.size);
  }

 private:
  struct Entry {
    uint32_t method = 0;
    uint64_t size = 0, comp_size = 0, local = 0;
  };

  size_t find_eocd() const {
    need(data_.size() >= 22, "file too short for a zip archive");
    const size_t lowest = data_.size() > 22 + 65535 ? data_.size() - 22 - 65535 : 0;
    for (size_t p = data_.size() - 22 + 1; p-- > lowest;)
      if (le(data_, p, 4) == 0x06054b50) return p;
    throw Error(
        str(what_, ": not a zip archive, or truncated (no end-of-central-directory record)"));
  }
  void need(bool ok, const std::string& what) const {
    if (!ok) throw Error(str(what_, ": truncated or damaged zip archive: ", what));
  }

  std::string_view data_;
  std::string what_;
  std::map<std::string, Entry> entries_;
};

// ---- pickle
PickleRef make(PickleValue::Kind kind) {
  auto v = std::make_shared<PickleValue>();
  v->kind = kind;
  return v;
}

at::ScalarType storage_dtype(const std::string& cls, const std::string& what) {
  static const std::unordered_map<std::string, at::ScalarType> types = {
      {"torch.FloatStorage", at::kFloat}, {"torch.DoubleStorage", at::kDouble},
      {"torch.HalfStorage", at::kHalf},   {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},   {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort}, {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},   {"torch.BoolStorage", at::kBool},
  };
  auto it = types.find(cls);
  if (it == types.end()) throw Error(str(what, ": unsupported storage type '", cls, "'"));
  return it->second;
}

class Unpickler {
 public:
  Unpickler(std::string_view pkl, const ZipReader& zip, std::string prefix, std::string what)
      : p_(pkl), zip_(zip), prefix_(std::move(prefix)), what_(std::move(what)) {}

  PickleRef run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80:  // PROTO
          byte();
          break;
        case 0x95:  // FRAME (proto 4): ignore framing
          take(8);
          break;
        case '.':
          return pop();  // STOP
        case '(':  // MARK
          marks_.push_back(stack_.size());
          break;
        case 'N':
          push(make(PickleValue::Kind::kNone));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE / NEWFALSE
          auto v = make(PickleValue::Kind::kBool);
          v->b = op == 0x88;
          push(v);
          break;
        }
        case 'J':  // BININT
          push_int(static_cast<int32_t>(read_uint(4)));
          break;
        case 'K':  // BININT1
          push_int(read_uint(1));
          break;
        case 'M':  // BININT2
          push_int(read_uint(2));
          break;
        case 0x8a:  // LONG1
          push_int(long_int(read_uint(1)));
          break;
        case 0x8b:  // LONG4
          push_int(long_int(read_uint(4)));
          break;
        case 'G': {  // BINFLOAT, big-endian
          uint64_t bits = 0;
          for (char c : take(8)) bits = (bits << 8) | static_cast<uint8_t>(c);
          auto v = make(PickleValue::Kind::kFloat);
          std::memcpy(&v->f, &bits, 8);
          push(v);
          break;
        }
        case 'X':  // BINUNICODE
          push_text(PickleValue::Kind::kString, read_uint(4));
          break;
        case 0x8c:  // SHORT_BINUNICODE
          push_text(PickleValue::Kind::kString, read_uint(1));
          break;
        case 0x8d:  // BINUNICODE8
          push_text(PickleValue::Kind::kString, read_uint(8));
          break;
        case 'T':  // BINSTRING
          push_text(PickleValue::Kind::kString, read_uint(4));
          break;
        case 'U':  // SHORT_BINSTRING
          push_text(PickleValue::Kind::kString, read_uint(1));
          break;
        case 'B':  // BINBYTES
          push_text(PickleValue::Kind::kBytes, read_uint(4));
          break;
        case 'C':  // SHORT_BINBYTES
          push_text(PickleValue::Kind::kBytes, read_uint(1));
          break;
        case ')':  // EMPTY_TUPLE
          push(make(PickleValue::Kind::kTuple));
          break;
        case ']':  // EMPTY_LIST
          push(make(PickleValue::Kind::kList));
          break;
        case '}':  // EMPTY_DICT
          push(make(PickleValue::Kind::kDict));
          break;
        case 't':
        case 'l': {  // TUPLE / LIST
          auto v = make(op == 't' ? PickleValue::Kind::kTuple : PickleValue::Kind::kList);
          v->items = pop_to_mark();
          push(v);
          break;
        }
        case 'd': {  // DICT
          auto v = make(PickleValue::Kind::kDict);
          add_pairs(*v, pop_to_mark());
          push(v);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1/2/3
          auto v = make(PickleValue::Kind::kTuple);
          const size_t n = op - 0x84;
          need(stack_.size() >= n, "stack underflow in TUPLE");
          v->items.assign(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          push(v);
          break;
        }
        case 'a': {  // APPEND
          auto item = pop();
          list_top()->items.push_back(item);
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_to_mark();
          auto& l = list_top()->items;
          l.insert(l.end(), items.begin(), items.end());
          break;
        }
        case 's': {  // SETITEM
          auto value = pop();
          auto key = pop();
          add_pairs(*dict_top(), {key, value});
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_to_mark();
          add_pairs(*dict_top(), items);
          break;
        }
        case 'q':  // BINPUT
          memo_[read_uint(1)] = top();
          break;
        case 'r':  // LONG_BINPUT
          memo_[read_uint(4)] = top();
          break;
        case 0x94:  // MEMOIZE
          memo_[memo_.size()] = top();
          break;
        case 'h':  // BINGET
          push(memo(read_uint(1)));
          break;
        case 'j':  // LONG_BINGET
          push(memo(read_uint(4)));
          break;
        case 'c': {  // GLOBAL
          const std::string module = line(), name = line();
          auto v = make(PickleValue::Kind::kGlobal);
          v->s = module + "." + name;
          push(v);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          auto name = pop(), module = pop();
          auto v = make(PickleValue::Kind::kGlobal);
          v->s = module->s + "." + name->s;
          push(v);
          break;
        }
        case 'Q':  // BINPERSID
          push(persistent_load(*pop()));
          break;
        case 'R':
        case 0x81: {  // REDUCE / NEWOBJ
          auto args = pop();
          auto callable = pop();
          push(call(*callable, *args));
          break;
        }
        case 'b':  // BUILD: object state (e.g. a state dict's _metadata) is unused
          pop();
          break;
        default:
          throw Error(str(what_, ": unsupported pickle opcode 0x", std::hex, int(op), std::dec,
                          " at byte ", pos_ - 1, " of the pickle"));
      }
    }
  }

 private:
  void need(bool ok, const char* what) const {
    if (!ok) throw Error(str(what_, ": malformed pickle: ", what, " (byte ", pos_, ")"));
  }
  std::string_view take(size_t n) {
    need(n <= p_.size() - pos_, "truncated");
    auto out = p_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint8_t byte() { return static_cast<uint8_t>(take(1)[0]); }
  uint64_t read_uint(int bytes) { return le(take(bytes), 0, bytes); }
  int64_t long_int(uint64_t n) {
    need(n <= 8, "integer wider than 64 bits");
    auto b = take(n);
    uint64_t v = n ? le(b, 0, static_cast<int>(n)) : 0;
    if (n && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) v |= ~uint64_t(0) << (8 * n);
    return static_cast<int64_t>(v);
  }
  std::string line() {
    const size_t end = p_.find('\n', pos_);
    need(end != std::string_view::npos, "unterminated GLOBAL");
    std::string out(p_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  void push(PickleRef v) { stack_.push_back(std::move(v)); }
  void push_int(int64_t i) {
    auto v = make(PickleValue::Kind::kInt);
    v->i = i;
    push(v);
  }
  void push_text(PickleValue::Kind kind, uint64_t n) {
    auto v = make(kind);
    v->s = std::string(take(n));
    push(v);
  }
  PickleRef pop() {
    need(!stack_.empty() && (marks_.empty() || stack_.size() > marks_.back()), "stack underflow");
    auto v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  const PickleRef& top() const {
    need(!stack_.empty(), "memo of an empty stack");
    return stack_.back();
  }
  std::vector<PickleRef> pop_to_mark() {
    need(!marks_.empty(), "no MARK");
    std::vector<PickleRef> out(stack_.begin() + marks_.back(), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return out;
  }
  PickleValue* list_top() {
    need(!stack_.empty() && stack_.back()->kind == PickleValue::Kind::kList,
         "APPEND to a non-list");
    return stack_.back().get();
  }
  PickleValue* dict_top() {
    need(!stack_.empty(), "SETITEM without a target");
    // Objects reduced from unknown classes (dict subclasses) accept items as a dict would.
    auto k = stack_.back()->kind;
    need(k == PickleValue::Kind::kDict || k == PickleValue::Kind::kObject, "SETITEM to a non-dict");
    return stack_.back().get();
  }
  void add_pairs(PickleValue& d, const std::vector<PickleRef>& kv) {
    need(kv.size() % 2 == 0, "odd number of dict items");
    for (size_t i = 0; i < kv.size(); i += 2) d.dict.emplace_back(kv[i], kv[i + 1]);
  }
  PickleRef memo(uint64_t key) const {
    auto it = memo_.find(key);
    need(it != memo_.end(), "memo key not found");
    return it->second;
  }

  // ('storage', storage class, key, location, numel) -> the flat storage, shared by key.
  PickleRef persistent_load(const PickleValue& pid) {
    need(pid.kind == PickleValue::Kind::kTuple && pid.items.size() >= 5 &&
             pid.items[0]->s == "storage",
         "persistent id is not a storage reference");
    const std::string key = pid.items[2]->s;
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    const at::ScalarType dtype = storage_dtype(pid.items[1]->s, what_);
    const int64_t numel = pid.items[4]->i;
    const std::string_view bytes = zip_.read(prefix_ + "data/" + key);
    auto v = make(PickleValue::Kind::kStorage);
    v->tensor = at::empty({numel}, at::TensorOptions(dtype));
    if (static_cast<uint64_t>(numel) * v->tensor.element_size() != bytes.size())
      throw Error(str(what_, ": storage ", key, " has ", bytes.size(), " bytes, expected ", numel,
                      " x ", v->tensor.element_size()));
    if (!bytes.empty()) std::memcpy(v->tensor.data_ptr(), bytes.data(), bytes.size());
    storages_[key] = v;
    return v;
  }

  std::vector<int64_t> int_tuple(const PickleValue& t) {
    std::vector<int64_t> out;
    for (const auto& x : t.items) {
      need(x->kind == PickleValue::Kind::kInt, "tensor size/stride is not an int tuple");
      out.push_back(x->i);
    }
    return out;
  }

  PickleRef call(const PickleValue& callable, const PickleValue& args) {
    const std::string& name = callable.s;
    const auto& a = args.items;
    if (name == "collections.OrderedDict" || name == "builtins.dict")
      return make(PickleValue::Kind::kDict);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      need(a.size() >= 4 && a[0]->kind == PickleValue::Kind::kStorage, "bad _rebuild_tensor args");
      auto v = make(PickleValue::Kind::kTensor);
      const auto size = int_tuple(*a[2]), stride = int_tuple(*a[3]);
      const int64_t offset = a[1]->i;
      // Bounds: the furthest element addressed must lie inside the storage.
      int64_t last = offset;
      for (size_t d = 0; d < size.size() && d < stride.size(); ++d)
        if (size[d] == 0)
          last = -1;
        else if (last >= 0)
          last += (size[d] - 1) * stride[d];
      need(size.size() == stride.size() && offset >= 0 && last < a[0]->tensor.numel(),
           "tensor view outside its storage");
      v->tensor = a[0]->tensor.as_strided(size, stride, offset);
      return v;
    }
    if (name == "torch._utils._rebuild_parameter" ||
        name == "torch._utils._rebuild_parameter_with_state") {
      need(!a.empty() && a[0]->kind == PickleValue::Kind::kTensor, "bad _rebuild_parameter args");
      return a[0];
    }
    auto v = make(PickleValue::Kind::kObject);  // opaque: kept for inspection, never executed
    v->s = name;
    v->items = a;
    return v;
  }

  std::string_view p_;
  size_t pos_ = 0;
  const ZipReader& zip_;
  std::string prefix_, what_;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleRef> memo_;
  std::unordered_map<std::string, PickleRef> storages_;
};

void flatten_into(const PickleValue& v, const std::string& prefix, NamedTensors& out) {
  if (v.kind == PickleValue::Kind::kTensor) {
    out.emplace_back(prefix, v.tensor);
    return;
  }
  if (v.kind != PickleValue::Kind::kDict) return;
  for (const auto& [k, value] : v.dict) {
    std::string key;
    if (k->kind == PickleValue::Kind::kString)
      key = k->s;
    else if (k->kind == PickleValue::Kind::kInt)
      key = std::to_string(k->i);
    else
      continue;
    flatten_into(*value, prefix.empty() ? key : prefix + "." + key, out);
  }
}

}  // namespace

const PickleValue* PickleValue::find(const std::string& key) const {
  for (const auto& [k, v] : dict)
    if (k->kind == Kind::kString && k->s == key) return v.get();
  return nullptr;
}

PickleRef parse_pth_bytes(const std::string& bytes, const std::string& what) {
  if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x80 && bytes.compare(0, 2, "PK") != 0)
    throw Error(str(what,
                    ": legacy (pre-1.6) torch.save format is not supported; HINT: re-save it "
                    "with torch.save(obj, path) from PyTorch >= 1.6"));
  ZipReader zip(bytes, what);
  std::string prefix;
  bool found = false;
  for (const auto& name : zip.names()) {
    const std::string tail = "data.pkl";
    if (name.size() >= tail.size() &&
        name.compare(name.size() - tail.size(), tail.size(), tail) == 0 &&
        name.find('/') == name.size() - tail.size() - 1) {
      prefix = name.substr(0, name.size() - tail.size());
      found = true;
      break;
    }
  }
  if (!found)
    throw Error(str(what, ": zip archive without a <name>/data.pkl entry: not a torch.save file"));
  if (zip.has(prefix + "byteorder")) {
    const auto order = zip.read(prefix + "byteorder");
    DETSEG_CHECK(order == "little", what, ": byte order '", std::string(order),
                 "' is not supported");
  }
  return Unpickler(zip.read(prefix + "data.pkl"), zip, prefix, what).run();
}

PickleRef read_pth(const std::string& path) { return parse_pth_bytes(read_file(path), path); }

NamedTensors flatten_tensors(const PickleValue& root) {
  NamedTensors out;
  flatten_into(root, "", out);
  return out;
}

NamedTensors read_pth_state_dict(const std::string& path, const std::string& key) {
  const PickleRef root = read_pth(path);
  const PickleValue* node = root.get();
  if (!key.empty()) {
    size_t start = 0;
    while (node && start <= key.size()) {
      const size_t dot = key.find('.', start);
      node =
          node->find(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    DETSEG_CHECK(node, path, ": no entry '", key, "' in the saved object");
  } else {
    bool direct = false;
    for (const auto& kv : node->dict)
      direct = direct || kv.second->kind == PickleValue::Kind::kTensor;
    if (!direct)
      for (const char* k : {"state_dict", "model", "model_state_dict"})
        if (const PickleValue* sub = node->find(k)) {
          node = sub;
          break;
        }
  }
  NamedTensors out = flatten_tensors(*node);
  DETSEG_CHECK(!out.empty(), path, ": no tensors found", key.empty() ? "" : " under '", key,
               key.empty() ? "" : "'");
  return out;
}

}  // namespace detseg
