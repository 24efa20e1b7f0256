// Implements: the torch.save reader: LibTorch's PyTorchStreamReader opens the zip container, and a
// pickle VM subset (protocols 2-4) rebuilds tensors from their storages. The pickle is ours, not
// torch::pickle_load's: that one rejects any class it does not know (detectron2's and mmdetection's
// checkpoints carry such metadata), where this keeps them as opaque objects and reads the tensors.
#include "detseg/io/pth_reader.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
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

// LibTorch's MemoryReadAdapter copies whatever range it is asked for, and miniz asks for ranges
// that a damaged archive's directory names: past the end of the bytes (a crash). This one copies
// only what is there and reports the short read, as a file would.
class BoundedReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReadAdapter(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

// miniz's reason for refusing an archive, as LibTorch passes it on ("PytorchStreamReader failed
// reading zip archive: failed finding central directory. This is an internal miniz error..."), in
// our words.
std::string zip_failure(const std::string& message) {
  static const std::pair<const char*, const char*> kReasons[] = {
      {"not a ZIP archive", "no zip signature: not a zip file"},
      {"failed finding central directory", "no zip directory at its end: the file is cut short, or not a zip file"},
      {"file read failed", "an entry lies past the end of the file: the file is cut short"},
      {"invalid header", "an entry's header is damaged"},
      {"decompression failed", "an entry's compressed bytes are damaged"},
      {"CRC-32", "an entry's checksum does not match its bytes"},
      {"unexpected decompressed size", "an entry's size does not match the zip directory"},
      {"not in a subdirectory", "its entries are not under one top folder, as torch.save writes them"},
      {"unsupported", "it uses a zip feature torch.save never writes (encryption, several disks)"},
  };
  for (const auto& [library, ours] : kReasons)
    if (message.find(library) != std::string::npos) return ours;
  return "its zip structure is damaged";
}

// ---- the zip container: LibTorch's own reader (stored or deflated entries, zip64). Names are
// relative to the archive's top folder, whatever torch.save named it. Its c10::Errors carry a C++
// backtrace; they become one-line detseg::Errors naming the file.
class ZipRecords {
 public:
  ZipRecords(const std::string& bytes, std::string what) : what_(std::move(what)), archive_bytes_(bytes.size()) {
    // The smallest zip file is its 22-byte end record.
    if (bytes.size() < 22)
      throw Error(str(what_, ": truncated or not a torch.save zip file (",
                      bytes.empty() ? std::string("an empty file") : str("only ", bytes.size(), " bytes"),
                      "; a zip file holds at least 22)"));
    guard("truncated or not a torch.save zip file", [&] {
      reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::make_shared<BoundedReadAdapter>(bytes));
    });
  }
  bool has(const std::string& name) {
    bool found = false;
    guard("damaged torch.save zip file", [&] { found = reader_->hasRecord(name); });
    return found;
  }
  size_t size(const std::string& name) {
    size_t n = 0;
    guard("damaged torch.save zip file", [&] {
      if (!reader_->hasRecord(name)) throw Error(str(what_, ": zip entry '", name, "' missing"));
      n = reader_->getRecordSize(name);
    });
    // Callers allocate this size before reading, and a damaged or hostile directory can claim
    // any: no entry holds more than deflate's best ratio (1032:1) times the archive's own bytes.
    if (n / 1032 > archive_bytes_)
      throw Error(str(what_, ": zip entry '", name, "' claims ", n, " bytes, more than a ", archive_bytes_,
                      "-byte archive can hold"));
    return n;
  }
  // Copies entry `name` (exactly `n` bytes) into dst.
  void read_into(const std::string& name, void* dst, size_t n) {
    guard("damaged torch.save zip file", [&] { reader_->getRecord(name, dst, n); });
  }
  std::string read(const std::string& name) {
    std::string out(size(name), '\0');
    read_into(name, out.data(), out.size());
    return out;
  }

 private:
  template <class F>
  void guard(const char* what, F&& f) {
    try {
      f();
    } catch (const c10::Error& e) {
      throw Error(str(what_, ": ", what, " (", zip_failure(e.what_without_backtrace()), ")"));
    }
  }
  std::string what_;
  size_t archive_bytes_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
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
  Unpickler(std::string_view pkl, ZipRecords& zip, std::string what)
      : p_(pkl), zip_(zip), what_(std::move(what)) {}

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
          // Not below the innermost MARK (as pop() checks): taking marked items left the mark
          // above the stack, and pop_to_mark() then copied a backwards range.
          need(stack_.size() >= n + (marks_.empty() ? 0 : marks_.back()), "stack underflow in TUPLE");
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
    need(!marks_.empty() && marks_.back() <= stack_.size(), "no MARK");
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
    const std::string entry = "data/" + key;
    const size_t bytes = zip_.size(entry);
    need(numel >= 0, "negative storage size");
    const size_t element = c10::elementSize(dtype);
    if (bytes % element != 0 || static_cast<uint64_t>(numel) != bytes / element)  // no wrapping product
      throw Error(str(what_, ": storage ", key, " has ", bytes, " bytes, expected ", numel, " x ", element));
    auto v = make(PickleValue::Kind::kStorage);
    v->tensor = at::empty({numel}, at::TensorOptions(dtype));
    if (bytes > 0) zip_.read_into(entry, v->tensor.data_ptr(), bytes);
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
  ZipRecords& zip_;
  std::string what_;
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
  ZipRecords zip(bytes, what);
  if (!zip.has("data.pkl"))
    throw Error(str(what, ": zip archive without a <name>/data.pkl entry: not a torch.save file"));
  if (zip.has("byteorder")) {
    const std::string order = zip.read("byteorder");
    DETSEG_CHECK(order == "little", what, ": byte order '", order, "' is not supported");
  }
  const std::string pickle = zip.read("data.pkl");
  return Unpickler(pickle, zip, what).run();
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
