//! The name a client certificate proves: its first DNS name, else its
//! first URI, else its subject's common name.
//!
//! Only certificates that chained to the door's client CA reach here (the
//! handshake checked them), so the name is as trustworthy as that CA.

use rustls::pki_types::CertificateDer;

/// The DER tag of an OBJECT IDENTIFIER.
const TAG_OID: u8 = 0x06;
/// The DER tags a common name may be written in: UTF8String,
/// PrintableString, IA5String.
const TAGS_STRING: [u8; 3] = [0x0c, 0x13, 0x16];
/// The object identifier of the common name attribute (2.5.4.3).
const OID_COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];
/// Longest DER length field read (four bytes: 4 GiB is beyond any name).
const LENGTH_BYTES_MAX: usize = 4;

/// The identity `certificate` proves, or `None` if it names nothing.
pub fn certificate_identity(certificate: &CertificateDer<'_>) -> Option<String> {
    let parsed = webpki::EndEntityCert::try_from(certificate).ok()?;
    if let Some(name) = parsed.valid_dns_names().next() {
        return Some(name.to_string());
    }
    if let Some(uri) = parsed.valid_uri_names().next() {
        return Some(uri.to_string());
    }
    common_name(parsed.subject())
}

/// The common name in a subject (the contents of its SEQUENCE: a list of
/// SETs, each of SEQUENCEs of an OID and a value).
fn common_name(mut subject: &[u8]) -> Option<String> {
    while !subject.is_empty() {
        let (_, set, rest) = element(subject)?;
        subject = rest;
        let mut attributes = set;
        while !attributes.is_empty() {
            let (_, attribute, rest) = element(attributes)?;
            attributes = rest;
            let (tag, oid, value) = element(attribute)?;
            if tag != TAG_OID || oid != OID_COMMON_NAME {
                continue;
            }
            let (tag, text, _) = element(value)?;
            if TAGS_STRING.contains(&tag) {
                return std::str::from_utf8(text).ok().map(str::to_string);
            }
        }
    }
    None
}

/// One DER element at the start of `input`: its tag, its contents and
/// what follows it; `None` if it runs past the end.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > LENGTH_BYTES_MAX || rest.len() < count {
            return None;
        }
        let length = rest[..count].iter().fold(0_usize, |length, &byte| (length << 8) | usize::from(byte));
        (length, &rest[count..])
    };
    if rest.len() < length {
        return None;
    }
    Some((tag, &rest[..length], &rest[length..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(params: rcgen::CertificateParams) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("certificate").der().clone()
    }

    #[test]
    fn a_dns_name_is_the_identity() {
        let params = rcgen::CertificateParams::new(vec!["broker-b.example".to_string()]).expect("params");
        assert_eq!(certificate_identity(&certificate(params)).as_deref(), Some("broker-b.example"));
    }

    #[test]
    fn without_alternative_names_the_common_name_is_the_identity() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "Sift");
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        assert_eq!(certificate_identity(&certificate(params)).as_deref(), Some("alice"));
    }

    #[test]
    fn a_certificate_naming_nothing_proves_nothing() {
        let params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        let mut no_names = params;
        no_names.distinguished_name = rcgen::DistinguishedName::new();
        assert_eq!(certificate_identity(&certificate(no_names)), None);
    }

    #[test]
    fn truncated_der_is_no_element() {
        assert_eq!(element(&[0x30, 0x05, 0x01]), None);
        assert_eq!(element(&[0x30, 0x85, 0, 0, 0, 0, 1]), None);
        assert_eq!(element(&[0x30, 0x81]), None);
        assert_eq!(element(&[0x30, 0x02, 0xaa, 0xbb, 0xcc]), Some((0x30, &[0xaa, 0xbb][..], &[0xcc][..])));
    }
}
