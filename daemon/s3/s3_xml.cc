#include "daemon/s3/s3_xml.h"

#include <expat.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace neffd::remote {
namespace {

// Deep enough for any S3 document; a guard against hostile nesting.
constexpr int kMaxDepth = 16;

struct Element {
  std::string name;
  std::string text;
  std::vector<std::unique_ptr<Element>> children;

  // The first child named `child`, or nullptr.
  const Element* Child(absl::string_view child) const {
    for (const auto& c : children) {
      if (c->name == child) return c.get();
    }
    return nullptr;
  }
  // The text of child `child`; empty when there is none.
  std::string ChildText(absl::string_view child) const {
    const Element* c = Child(child);
    return c != nullptr ? c->text : "";
  }
};

struct TreeBuilder {
  std::unique_ptr<Element> root;
  std::vector<Element*> open;
  bool too_deep = false;
};

absl::string_view LocalName(const XML_Char* name) {
  absl::string_view n(name);
  // With namespace processing on, expat reports "URI|local".
  size_t bar = n.rfind('|');
  return bar == absl::string_view::npos ? n : n.substr(bar + 1);
}

void OnStart(void* user, const XML_Char* name, const XML_Char**) {
  auto* b = static_cast<TreeBuilder*>(user);
  if (b->open.size() >= kMaxDepth) {
    b->too_deep = true;
    return;
  }
  auto element = std::make_unique<Element>();
  element->name = std::string(LocalName(name));
  Element* raw = element.get();
  if (b->open.empty()) {
    b->root = std::move(element);
  } else {
    b->open.back()->children.push_back(std::move(element));
  }
  b->open.push_back(raw);
}

void OnEnd(void* user, const XML_Char*) {
  auto* b = static_cast<TreeBuilder*>(user);
  if (!b->too_deep && !b->open.empty()) b->open.pop_back();
}

void OnText(void* user, const XML_Char* text, int length) {
  auto* b = static_cast<TreeBuilder*>(user);
  if (!b->too_deep && !b->open.empty())
    b->open.back()->text.append(text, length);
}

absl::StatusOr<std::unique_ptr<Element>> Parse(absl::string_view xml,
                                               absl::string_view what) {
  XML_Parser parser = XML_ParserCreateNS(nullptr, '|');
  TreeBuilder builder;
  XML_SetUserData(parser, &builder);
  XML_SetElementHandler(parser, OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser, OnText);
  XML_Status status =
      XML_Parse(parser, xml.data(), static_cast<int>(xml.size()), XML_TRUE);
  std::string error =
      status == XML_STATUS_OK
          ? ""
          : absl::StrCat(XML_ErrorString(XML_GetErrorCode(parser)), " at line ",
                         XML_GetCurrentLineNumber(parser));
  XML_ParserFree(parser);
  if (!error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not well-formed XML: ", error));
  }
  if (builder.too_deep) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": nested deeper than ", kMaxDepth, " elements"));
  }
  if (builder.root == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": empty document"));
  }
  return std::move(builder.root);
}

absl::StatusOr<std::unique_ptr<Element>> ParseRoot(absl::string_view xml,
                                                   absl::string_view root) {
  absl::StatusOr<std::unique_ptr<Element>> tree = Parse(xml, root);
  if (!tree.ok()) return tree.status();
  if ((*tree)->name != root) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a <", root, "> document, got <", (*tree)->name, ">"));
  }
  return tree;
}

std::string EscapeXmlText(absl::string_view text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

}  // namespace

absl::StatusOr<S3ErrorDocument> ParseS3Error(absl::string_view xml) {
  absl::StatusOr<std::unique_ptr<Element>> tree = Parse(xml, "S3 error");
  if (!tree.ok()) return tree.status();
  if ((*tree)->name != "Error") {
    return absl::NotFoundError(
        absl::StrCat("not an S3 error document: <", (*tree)->name, ">"));
  }
  S3ErrorDocument error{(*tree)->ChildText("Code"),
                        (*tree)->ChildText("Message")};
  if (error.code.empty()) {
    return absl::InvalidArgumentError("S3 error: <Error> without <Code>");
  }
  return error;
}

absl::StatusOr<std::string> ParseUploadId(absl::string_view xml) {
  absl::StatusOr<std::unique_ptr<Element>> tree =
      ParseRoot(xml, "InitiateMultipartUploadResult");
  if (!tree.ok()) return tree.status();
  std::string upload_id = (*tree)->ChildText("UploadId");
  if (upload_id.empty()) {
    return absl::InvalidArgumentError(
        "InitiateMultipartUploadResult: no <UploadId>");
  }
  return upload_id;
}

absl::StatusOr<ListObjectsPage> ParseListObjectsV2(absl::string_view xml) {
  absl::StatusOr<std::unique_ptr<Element>> tree =
      ParseRoot(xml, "ListBucketResult");
  if (!tree.ok()) return tree.status();
  ListObjectsPage page;
  for (const auto& child : (*tree)->children) {
    if (child->name != "Contents") continue;
    ListedObject object{child->ChildText("Key"), 0, child->ChildText("ETag")};
    if (object.key.empty() ||
        !absl::SimpleAtoi(child->ChildText("Size"), &object.size)) {
      return absl::InvalidArgumentError(
          "ListBucketResult: <Contents> without <Key> or a numeric <Size>");
    }
    page.objects.push_back(std::move(object));
  }
  if ((*tree)->ChildText("IsTruncated") == "true") {
    page.next_continuation_token = (*tree)->ChildText("NextContinuationToken");
    if (page.next_continuation_token.empty()) {
      return absl::InvalidArgumentError(
          "ListBucketResult: <IsTruncated> true without "
          "<NextContinuationToken>");
    }
  }
  return page;
}

std::string CompleteMultipartUploadXml(
    const std::vector<CompletedPart>& parts) {
  std::string xml = "<CompleteMultipartUpload>";
  for (const CompletedPart& part : parts) {
    absl::StrAppend(&xml, "<Part><PartNumber>", part.part_number,
                    "</PartNumber><ETag>", EscapeXmlText(part.etag),
                    "</ETag></Part>");
  }
  absl::StrAppend(&xml, "</CompleteMultipartUpload>");
  return xml;
}

}  // namespace neffd::remote
