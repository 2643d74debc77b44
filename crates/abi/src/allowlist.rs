//! The server's allowlist service (`wsrep_allowlist`, the table `mysql.wsrep_allowlist`):
//! MariaDB hands it over before `init` and takes it back after `free`; the group transport
//! asks it about the address of every peer that connects to this node.
use crate::types::{wsrep_allowlist_service_v1_t, wsrep_buf_t, wsrep_status_t};
use lockstep_provider::types::Status;
use std::ffi::{c_int, c_void};
use std::net::IpAddr;
use std::sync::RwLock;

/// `WSREP_ALLOWLIST_KEY_IP`: the value is a peer's IP address. The server throws on keys it
/// does not know, so this is the only one we pass.
const KEY_IP: c_int = 0;

type Check = unsafe extern "C" fn(*mut c_void, c_int, *const wsrep_buf_t) -> wsrep_status_t;

struct Service {
    check: Check,
    context: *mut c_void,
}

// SAFETY: the server's callback may be called from any thread; `context` is its own
// (NULL from MariaDB), kept until `wsrep_deinit_allowlist_service_v1`.
unsafe impl Send for Service {}
unsafe impl Sync for Service {}

/// Read-locked during a check, so that `remove` waits for checks in progress.
static SERVICE: RwLock<Option<Service>> = RwLock::new(None);

/// Keeps the server's service. A null pointer or callback leaves everybody allowed.
///
/// # Safety
/// `service` is null or points to a valid `wsrep_allowlist_service_v1_t`.
pub unsafe fn install(service: *const wsrep_allowlist_service_v1_t) {
    // SAFETY: the caller's contract.
    let Some(service) = (unsafe { service.as_ref() }) else { return };
    if service.allowlist_cb.is_null() {
        return;
    }
    // SAFETY: the field holds a pointer to a function of the service's v1 signature.
    let check = unsafe { std::mem::transmute::<*mut c_void, Check>(service.allowlist_cb) };
    *SERVICE.write().unwrap_or_else(|e| e.into_inner()) = Some(Service { check, context: service.context });
}

pub fn remove() {
    *SERVICE.write().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Whether the server allows a peer at `ip`; everybody while no service is installed.
pub fn allows(ip: IpAddr) -> bool {
    let service = SERVICE.read().unwrap_or_else(|e| e.into_inner());
    let Some(service) = service.as_ref() else { return true };
    // The server reads `len` bytes; the NUL is for a reader that expects a C string.
    let text = format!("{ip}\0");
    let value = wsrep_buf_t { ptr: text.as_ptr().cast(), len: text.len() - 1 };
    // SAFETY: `value` and `text` outlive the call; the callback is the server's.
    unsafe { (service.check)(service.context, KEY_IP, &value) == Status::Ok as wsrep_status_t }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

    unsafe extern "C" fn only_loopback_one(_: *mut c_void, key: c_int, value: *const wsrep_buf_t) -> wsrep_status_t {
        assert_eq!(key, KEY_IP);
        // SAFETY: the provider passes a valid buffer of `len` bytes.
        let value = unsafe { &*value };
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(value.ptr.cast::<u8>(), value.len) };
        let ip = String::from_utf8(bytes.to_vec()).expect("text");
        SEEN.lock().unwrap().push(ip.clone());
        if ip == "127.0.0.1" {
            Status::Ok as wsrep_status_t
        } else {
            Status::NotAllowed as wsrep_status_t
        }
    }

    #[test]
    fn the_servers_callback_decides_by_ip_address_once_installed_and_everybody_is_allowed_after_removal() {
        let other: IpAddr = "127.0.0.3".parse().unwrap();
        assert!(allows(other), "no service: everybody");
        let service = wsrep_allowlist_service_v1_t {
            allowlist_cb: only_loopback_one as *mut c_void,
            context: std::ptr::null_mut(),
        };
        // SAFETY: a valid service struct.
        unsafe { install(&service) };
        assert!(allows("127.0.0.1".parse().unwrap()));
        assert!(!allows(other));
        assert!(!allows("::1".parse().unwrap()));
        remove();
        assert!(allows(other));
        assert_eq!(*SEEN.lock().unwrap(), ["127.0.0.1", "127.0.0.3", "::1"]);
    }
}
