// A minimal IndexedDB key-value store for the console: one database, one
// object store. IndexedDB (unlike localStorage) keeps a CryptoKey as it is,
// non-extractable, so a private key lives here without ever being readable.
const DATABASE = "synapse-console";
const STORE = "kv";

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error("IndexedDB request failed"));
  });
}

let opened: Promise<IDBDatabase> | undefined;

function database(): Promise<IDBDatabase> {
  opened ??= new Promise<IDBDatabase>((resolve, reject) => {
    const req = indexedDB.open(DATABASE, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error("cannot open IndexedDB"));
    req.onblocked = () => reject(new Error("IndexedDB is blocked by another tab of the console"));
  });
  return opened;
}

async function withStore<T>(mode: IDBTransactionMode, action: (store: IDBObjectStore) => IDBRequest<T>): Promise<T> {
  const db = await database();
  const transaction = db.transaction(STORE, mode);
  const result = request(action(transaction.objectStore(STORE)));
  await new Promise<void>((resolve, reject) => {
    transaction.oncomplete = () => resolve();
    transaction.onerror = () => reject(transaction.error ?? new Error("IndexedDB transaction failed"));
    transaction.onabort = () => reject(transaction.error ?? new Error("IndexedDB transaction aborted"));
  });
  return result;
}

export async function idbGet(key: string): Promise<unknown> {
  return withStore("readonly", (store) => store.get(key));
}

export async function idbPut(key: string, value: unknown): Promise<void> {
  await withStore("readwrite", (store) => store.put(value, key));
}
